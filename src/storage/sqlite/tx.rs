//! A write transaction that cannot outlive its scope: committed explicitly, rolled back when
//! dropped otherwise (an error returned early, or a panic unwinding through). Without the
//! guard, a panic between `BEGIN` and `COMMIT` would leave this worker holding the write lock,
//! and every worker of the host would answer "unavailable" until it was recycled.

use rusqlite::Connection;

pub struct WriteTx<'c> {
    conn: &'c Connection,
    open: bool,
}

/// A read transaction (one snapshot for several statements), with the same guard; its BEGIN
/// takes no lock a writer waits for (WAL). Cached statements, as for [`WriteTx`].
pub struct ReadTx<'c>(WriteTx<'c>);

impl<'c> ReadTx<'c> {
    pub fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        conn.prepare_cached("BEGIN")?.execute([])?;
        Ok(Self(WriteTx { conn, open: true }))
    }

    pub fn end(self) -> rusqlite::Result<()> {
        self.0.commit()
    }
}

impl<'c> WriteTx<'c> {
    /// `BEGIN IMMEDIATE`: takes the write lock now (waiting through the busy handler), so that
    /// two workers never both read the same tokens. BEGIN, COMMIT and ROLLBACK are cached
    /// statements: parsing them anew on every decision cost a fifth of its instructions.
    pub fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Self { conn, open: true })
    }

    pub fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.open = false;
        Ok(())
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        // Where SQLite already rolled back by itself (some errors do), the connection is back
        // in autocommit and there is nothing left to undo.
        if self.open && !self.conn.is_autocommit() {
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (tempfile::TempDir, Connection, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        let a = Connection::open(&path).unwrap();
        a.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE t(x)")
            .unwrap();
        let b = Connection::open(&path).unwrap();
        (dir, a, b)
    }

    #[test]
    fn a_committed_transaction_keeps_its_writes() {
        let (_d, a, b) = pair();
        let tx = WriteTx::begin(&a).unwrap();
        a.execute("INSERT INTO t VALUES (1)", []).unwrap();
        tx.commit().unwrap();
        let n: i64 = b
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn a_dropped_transaction_rolls_back_and_frees_the_lock() {
        let (_d, a, b) = pair();
        {
            let _tx = WriteTx::begin(&a).unwrap();
            a.execute("INSERT INTO t VALUES (1)", []).unwrap();
        }
        assert!(a.is_autocommit());
        b.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT")
            .unwrap();
        let n: i64 = b
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }
}
