/*
 * Floors for bench/run: what no PHP peer can beat, measured in the same run.
 *
 *   floor sqlite DB N SUBJECTS LIMIT PER OUT
 *     The bare SQLite WAL write transaction of the PDO peers, from C with prepared statements:
 *     BEGIN IMMEDIATE, SELECT, UPSERT, COMMIT (journal_mode=WAL, synchronous=NORMAL), N
 *     decisions round-robin over SUBJECTS 16-byte ids. Writes one latency (ns) per line to OUT.
 *     Linked with the SQLite amalgamation that the extension bundles (see bench/run).
 *
 *   floor flock LOCKFILE PROCS SECONDS SECTION_NS OUT
 *     The ideal-lock floor: PROCS CPU-bound processes, each in a loop taking flock(LOCK_EX),
 *     spinning SECTION_NS inside it, releasing; for SECONDS. Writes every per-call latency (ns),
 *     one per line, to OUT.<i> for process i.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die(const char *what) {
    fprintf(stderr, "floor: %s\n", what);
    exit(2);
}

static int write_samples(const char *path, const int64_t *v, long n) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    for (long i = 0; i < n; i++) fprintf(f, "%lld\n", (long long)v[i]);
    return fclose(f);
}

#ifndef NO_SQLITE
#include "sqlite3.h"

static void check(sqlite3 *db, int rc, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "floor: %s: %s\n", what, sqlite3_errmsg(db));
        exit(2);
    }
}

static int run_sqlite(int argc, char **argv) {
    if (argc != 8) die("usage: floor sqlite DB N SUBJECTS LIMIT PER OUT");
    const char *path = argv[2];
    long n = atol(argv[3]), subjects = atol(argv[4]);
    double limit = atof(argv[5]), per = atof(argv[6]);
    if (n <= 0 || subjects <= 0 || limit <= 0 || per <= 0) die("bad arguments");
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) die("cannot open database");
    sqlite3_busy_timeout(db, 5000);
    check(db, sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
        "CREATE TABLE IF NOT EXISTS bucket (id BLOB PRIMARY KEY, micro INTEGER NOT NULL,"
        " ts INTEGER NOT NULL) WITHOUT ROWID", 0, 0, 0), "setup");
    sqlite3_stmt *begin, *sel, *up, *commit;
    check(db, sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, 0), "prepare");
    check(db, sqlite3_prepare_v2(db, "SELECT micro, ts FROM bucket WHERE id = ?1", -1, &sel, 0), "prepare");
    check(db, sqlite3_prepare_v2(db, "INSERT INTO bucket (id, micro, ts) VALUES (?1, ?2, ?3)"
        " ON CONFLICT (id) DO UPDATE SET micro = excluded.micro, ts = excluded.ts", -1, &up, 0), "prepare");
    check(db, sqlite3_prepare_v2(db, "COMMIT", -1, &commit, 0), "prepare");

    int64_t *lat = malloc(sizeof(int64_t) * n);
    unsigned char (*ids)[16] = malloc(16 * (subjects + 1));
    if (!lat || !ids) die("out of memory");
    for (long s = 0; s <= subjects; s++) {  /* fixed pseudo-random 16-byte ids; the last is warm-up */
        uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(s + 1), y = x ^ (x >> 29) ^ 0xbf58476d1ce4e5b9ULL;
        memcpy(ids[s], &x, 8);
        memcpy(ids[s] + 8, &y, 8);
    }
    long admitted = 0;
    const int64_t full = (int64_t)limit * 1000000;
    const double rate = limit / per;  /* micro-tokens per microsecond */
    for (long k = -100; k < n; k++) {  /* 100 warm-up decisions on their own subject, not timed */
        const unsigned char *id = k < 0 ? ids[subjects] : ids[k % subjects];
        int64_t t0 = now_ns();
        check(db, sqlite3_step(begin), "begin");
        sqlite3_reset(begin);
        int64_t now = wall_us();
        sqlite3_bind_blob(sel, 1, id, 16, SQLITE_STATIC);
        int64_t micro = full, ts = now;
        if (sqlite3_step(sel) == SQLITE_ROW) {
            micro = sqlite3_column_int64(sel, 0);
            ts = sqlite3_column_int64(sel, 1);
        }
        sqlite3_reset(sel);
        int64_t earned = now > ts ? (int64_t)((double)(now - ts) * rate) : 0;
        if (earned > 0) {
            micro = micro + earned > full ? full : micro + earned;
            ts = now;
        }
        int allowed = micro >= 1000000;
        if (allowed) micro -= 1000000;
        sqlite3_bind_blob(up, 1, id, 16, SQLITE_STATIC);
        sqlite3_bind_int64(up, 2, micro);
        sqlite3_bind_int64(up, 3, ts);
        check(db, sqlite3_step(up), "upsert");
        sqlite3_reset(up);
        check(db, sqlite3_step(commit), "commit");
        sqlite3_reset(commit);
        int64_t t1 = now_ns();
        if (k >= 0) {
            lat[k] = t1 - t0;
            admitted += allowed;
        }
    }
    if (write_samples(argv[7], lat, n) != 0) die("cannot write samples");
    printf("{\"sqlite\":\"%s\",\"admitted\":%ld}\n", sqlite3_libversion(), admitted);
    sqlite3_finalize(begin);
    sqlite3_finalize(sel);
    sqlite3_finalize(up);
    sqlite3_finalize(commit);
    sqlite3_close(db);
    return 0;
}
#endif

static int run_flock(int argc, char **argv) {
    if (argc != 7) die("usage: floor flock LOCKFILE PROCS SECONDS SECTION_NS OUT");
    const char *lockfile = argv[2], *out = argv[6];
    int procs = atoi(argv[3]);
    double seconds = atof(argv[4]);
    int64_t section = atoll(argv[5]);
    if (procs < 1 || procs > 64 || seconds <= 0 || seconds > 60 || section < 0) die("bad arguments");
    int64_t start = now_ns() + 200000000, end = start + (int64_t)(seconds * 1e9);
    pid_t pids[64];
    for (int i = 0; i < procs; i++) {
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            int fd = open(lockfile, O_RDWR | O_CREAT, 0600);  /* own open file description */
            if (fd < 0) _exit(3);
            long cap = (long)(seconds * 2e6) + 1024, n = 0;
            int64_t *lat = malloc(sizeof(int64_t) * cap);
            if (!lat) _exit(3);
            while (now_ns() < start) usleep(1000);
            for (;;) {
                int64_t t0 = now_ns();
                if (flock(fd, LOCK_EX) != 0) _exit(4);
                int64_t in = now_ns();
                while (now_ns() - in < section) { /* the critical section: CPU-bound */ }
                flock(fd, LOCK_UN);
                int64_t t1 = now_ns();
                if (n < cap) lat[n++] = t1 - t0;
                if (t1 >= end) break;
            }
            char path[4096];
            snprintf(path, sizeof path, "%s.%d", out, i);
            _exit(write_samples(path, lat, n) == 0 ? 0 : 5);
        }
        pids[i] = pid;
    }
    int failed = 0;
    for (int i = 0; i < procs; i++) {
        int st;
        if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
    }
    if (failed) die("a child failed");
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "flock") == 0) return run_flock(argc, argv);
#ifndef NO_SQLITE
    if (argc >= 2 && strcmp(argv[1], "sqlite") == 0) return run_sqlite(argc, argv);
#endif
    die("usage: floor sqlite|flock ...");
    return 2;
}
