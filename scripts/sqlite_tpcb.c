/*
 * TPC-B on SQLite: the baseline of `scripts/bench-sqlite.sh` for the engine's CPU per
 * transaction (docs/PERFORMANCE.md, "The engine against SQLite").
 *
 * The same database and transaction as `noftl bench tpcb` (crates/kits/src/tpcb.rs): branch,
 * teller and account rows of 100 bytes, history rows of 58, 10 tellers and 100,000 accounts per
 * branch; a uniform teller, its branch as the home branch, the account from the home branch
 * with probability 85% (else uniformly from the others), a delta uniform in
 * [-999,999, +999,999] cents; update account, teller and branch, insert a history row, commit.
 * SQLite's settings are the ones a careful user would pick for a durable OLTP store: WAL,
 * synchronous=FULL (the log is synced at every commit), 4 KiB pages, a 256-page cache (the
 * engine's 2% buffer at scale 1), prepared statements, one connection. The database goes where
 * the caller says (tmpfs in the script: no device time on either side).
 *
 * Usage: sqlite_tpcb DB_PATH SCALE TXNS SEED
 * Prints one line: "txns=N wall_s=S tx_per_s=R cpu_s=C".
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(sqlite3 *db, const char *what) {
    fprintf(stderr, "sqlite_tpcb: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
    exit(1);
}

static void exec(sqlite3 *db, const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite_tpcb: %s: %s\n", sql, err);
        exit(1);
    }
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK)
        die(db, sql);
    return s;
}

static void step_done(sqlite3 *db, sqlite3_stmt *s) {
    if (sqlite3_step(s) != SQLITE_DONE) die(db, sqlite3_sql(s));
    sqlite3_reset(s);
}

/* xoshiro256++ (the engine's kits use the same family of generator; the streams differ). */
static uint64_t st[4];
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t next(void) {
    uint64_t r = rotl(st[0] + st[3], 23) + st[0], t = st[1] << 17;
    st[2] ^= st[0]; st[3] ^= st[1]; st[1] ^= st[2]; st[0] ^= st[3]; st[2] ^= t;
    st[3] = rotl(st[3], 45);
    return r;
}
static uint64_t below(uint64_t n) { return next() % n; }

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: sqlite_tpcb DB_PATH SCALE TXNS SEED\n");
        return 2;
    }
    const char *path = argv[1];
    long scale = atol(argv[2]), txns = atol(argv[3]);
    uint64_t seed = strtoull(argv[4], NULL, 10);
    if (scale < 1 || txns < 1) {
        fprintf(stderr, "sqlite_tpcb: SCALE and TXNS must be positive\n");
        return 2;
    }
    const long tellers = 10 * scale, accounts = 100000 * scale;
    st[0] = seed ^ 0x9E3779B97F4A7C15ull; st[1] = seed + 1; st[2] = ~seed; st[3] = seed * 3 + 7;
    for (int i = 0; i < 16; i++) next();

    remove(path);
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) die(db, "open");
    exec(db, "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
             "PRAGMA cache_size=256;");
    exec(db, "CREATE TABLE branch (b_id INTEGER PRIMARY KEY, b_balance INTEGER, b_filler TEXT);"
             "CREATE TABLE teller (t_id INTEGER PRIMARY KEY, t_b_id INTEGER, t_balance INTEGER,"
             " t_filler TEXT);"
             "CREATE TABLE account (a_id INTEGER PRIMARY KEY, a_b_id INTEGER, a_balance INTEGER,"
             " a_filler TEXT);"
             "CREATE TABLE history (h_t_id INTEGER, h_b_id INTEGER, h_a_id INTEGER,"
             " h_delta INTEGER, h_time INTEGER, h_seq INTEGER, h_filler TEXT);");

    /* The load, in one transaction (not timed). */
    char fill88[89], fill84[85], fill22[23];
    memset(fill88, 'b', 88); fill88[88] = 0;
    memset(fill84, 'a', 84); fill84[84] = 0;
    memset(fill22, 'h', 22); fill22[22] = 0;
    exec(db, "BEGIN");
    sqlite3_stmt *ib = prepare(db, "INSERT INTO branch VALUES (?1, 0, ?2)");
    sqlite3_stmt *it = prepare(db, "INSERT INTO teller VALUES (?1, ?2, 0, ?3)");
    sqlite3_stmt *ia = prepare(db, "INSERT INTO account VALUES (?1, ?2, 0, ?3)");
    for (long b = 0; b < scale; b++) {
        sqlite3_bind_int64(ib, 1, b);
        sqlite3_bind_text(ib, 2, fill88, 88, SQLITE_STATIC);
        step_done(db, ib);
    }
    for (long t = 0; t < tellers; t++) {
        sqlite3_bind_int64(it, 1, t);
        sqlite3_bind_int64(it, 2, t / 10);
        sqlite3_bind_text(it, 3, fill84, 84, SQLITE_STATIC);
        step_done(db, it);
    }
    for (long a = 0; a < accounts; a++) {
        sqlite3_bind_int64(ia, 1, a);
        sqlite3_bind_int64(ia, 2, a / 100000);
        sqlite3_bind_text(ia, 3, fill84, 84, SQLITE_STATIC);
        step_done(db, ia);
    }
    exec(db, "COMMIT");
    exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    sqlite3_finalize(ib); sqlite3_finalize(it); sqlite3_finalize(ia);

    sqlite3_stmt *begin = prepare(db, "BEGIN");
    sqlite3_stmt *commit = prepare(db, "COMMIT");
    sqlite3_stmt *ua = prepare(db,
        "UPDATE account SET a_balance = a_balance + ?1 WHERE a_id = ?2 RETURNING a_balance");
    sqlite3_stmt *ut = prepare(db, "UPDATE teller SET t_balance = t_balance + ?1 WHERE t_id = ?2");
    sqlite3_stmt *ub = prepare(db, "UPDATE branch SET b_balance = b_balance + ?1 WHERE b_id = ?2");
    sqlite3_stmt *ih = prepare(db, "INSERT INTO history VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");

    double wall0 = now_s(CLOCK_MONOTONIC), cpu0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    for (long i = 0; i < txns; i++) {
        long t = (long)below(tellers), b = t / 10, a;
        if (scale == 1 || below(100) < 85) {
            a = b * 100000 + (long)below(100000);
        } else {
            long other = (long)below(scale - 1);
            if (other >= b) other++;
            a = other * 100000 + (long)below(100000);
        }
        int64_t delta = (int64_t)below(1999999) - 999999;
        step_done(db, begin);
        sqlite3_bind_int64(ua, 1, delta);
        sqlite3_bind_int64(ua, 2, a);
        if (sqlite3_step(ua) != SQLITE_ROW) die(db, "update account");
        (void)sqlite3_column_int64(ua, 0);
        step_done(db, ua);
        sqlite3_bind_int64(ut, 1, delta);
        sqlite3_bind_int64(ut, 2, t);
        step_done(db, ut);
        sqlite3_bind_int64(ub, 1, delta);
        sqlite3_bind_int64(ub, 2, b);
        step_done(db, ub);
        sqlite3_bind_int64(ih, 1, t);
        sqlite3_bind_int64(ih, 2, b);
        sqlite3_bind_int64(ih, 3, a);
        sqlite3_bind_int64(ih, 4, delta);
        sqlite3_bind_int64(ih, 5, i);
        sqlite3_bind_int64(ih, 6, i);
        sqlite3_bind_text(ih, 7, fill22, 22, SQLITE_STATIC);
        step_done(db, ih);
        step_done(db, commit);
    }
    double wall = now_s(CLOCK_MONOTONIC) - wall0, cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;

    /* TPC-B's consistency condition, so a wrong run cannot pass for a fast one. */
    sqlite3_stmt *q = prepare(db,
        "SELECT (SELECT sum(a_balance) FROM account), (SELECT sum(t_balance) FROM teller),"
        " (SELECT sum(b_balance) FROM branch), (SELECT sum(h_delta) FROM history),"
        " (SELECT count(*) FROM history)");
    if (sqlite3_step(q) != SQLITE_ROW) die(db, "check");
    int64_t sa = sqlite3_column_int64(q, 0), stl = sqlite3_column_int64(q, 1),
            sb = sqlite3_column_int64(q, 2), sh = sqlite3_column_int64(q, 3),
            nh = sqlite3_column_int64(q, 4);
    if (sa != stl || stl != sb || sb != sh || nh != txns) {
        fprintf(stderr, "sqlite_tpcb: consistency check failed: %lld %lld %lld %lld, %lld rows\n",
                (long long)sa, (long long)stl, (long long)sb, (long long)sh, (long long)nh);
        return 1;
    }
    sqlite3_finalize(q);
    sqlite3_finalize(begin); sqlite3_finalize(commit); sqlite3_finalize(ua);
    sqlite3_finalize(ut); sqlite3_finalize(ub); sqlite3_finalize(ih);
    sqlite3_close(db);
    remove(path);
    printf("txns=%ld wall_s=%.3f tx_per_s=%.0f cpu_s=%.3f\n", txns, wall, txns / wall, cpu);
    return 0;
}
