<?php
// What php-tests/status/run reads from a page as the browser rendered it (chromium --dump-dom):
//   php dom.php FILE    prints JSON: backend, counters, rates, pseudonyms, bars, svg, refresh
$doc = new DOMDocument();
libxml_use_internal_errors(true);
$doc->loadHTML(file_get_contents($argv[1]));
$x = new DOMXPath($doc);
$out = ['backend' => trim((string)$x->evaluate('string(//*[@id="backend"])')),
    'breaker' => trim((string)$x->evaluate('string(//*[@id="breaker"])')),
        'counters' => [], 'rates' => [], 'pseudonyms' => [],
        'bars' => $x->query('//*[local-name()="svg"]//*[local-name()="rect" and contains(@class, "bar")]')->length,
        'svg' => $x->query('//*[local-name()="svg"]')->length,
        'scripts' => $x->query('//script')->length,
        'refresh' => (string)$x->evaluate('string(//meta[@http-equiv="refresh"]/@content)'),
        'error' => trim((string)$x->evaluate('string(//*[@id="error"])'))];
foreach ($x->query('//td[@data-counter]') as $td) {
    $out['counters'][$td->getAttribute('data-counter')] = (int)trim($td->textContent);
}
foreach ($x->query('//td[@data-rate]') as $td) {
    $out['rates'][$td->getAttribute('data-rate')] = trim($td->textContent);
}
foreach ($x->query('//table[@id="top"]//td[1]') as $td) {
    $out['pseudonyms'][] = trim($td->textContent);
}
echo json_encode($out), "\n";
