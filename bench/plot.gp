# Latency distributions of bench/run, drawn by bench/lib/report.php:
#   gnuplot -e "dir='...'; out='x.png'; peers='floor a b'; labels1='\"..\" ..'; labels2='..';
#               colors='#000000 ..'; t1='..'; t2='..'; subtitle='..'" bench/plot.gp
# Left: one process; right: 8 processes on one subject. x: percentile on a 1/(1-q) scale
# (HdrHistogram style, the tail stretched out); y: per-call latency in µs, log scale.
set terminal pngcairo size 1500,760 font 'DejaVu Sans,10' noenhanced
set output out
set multiplot layout 1,2 title subtitle font 'DejaVu Sans,11'
set logscale xy
set xrange [1:*]
set xtics ("50%%" 2, "90%%" 10, "99%%" 100, "99.9%%" 1000, "99.99%%" 10000, "99.999%%" 100000, "99.9999%%" 1000000)
set ytics ("0.1 µs" 0.1, "1 µs" 1, "10 µs" 10, "100 µs" 100, "1 ms" 1000, "10 ms" 10000, "100 ms" 100000, "1 s" 1000000)
set mytics 10
set grid xtics ytics mytics lc rgb '#dddddd'
unset xlabel  # the % tics say it; a label would collide with the key below
set ylabel 'latency per call'
set yrange [0.1:*]
set key below horizontal maxcols 2 box font ",9" width 1 spacing 1.1 title 'x: percentile of calls, y: latency of one acquire() call' font ',9'
set border lw 1

set title t1 font ',11'
plot for [i=1:words(peers)] dir.'/single-'.word(peers,i).'.dat' using 1:2 with lines \
     lw (word(peers,i) eq 'ratelimit' ? 3 : 1.6) dt 1+(i == 1) lc rgb word(colors,i) title word(labels1,i)

set title t2 font ',11'
plot for [i=1:words(peers)] dir.'/contend-same-'.word(peers,i).'.dat' using 1:2 with lines \
     lw (word(peers,i) eq 'ratelimit' ? 3 : 1.6) dt 1+(i == 1) lc rgb word(colors,i) title word(labels2,i)

unset multiplot
