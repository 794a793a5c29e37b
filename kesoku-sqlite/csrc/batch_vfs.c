/*
** A VFS shim that writes a commit's log frames in one write call.
**
** SQLite appends a WAL frame as two writes (its 24-byte header, then the
** page), so a commit of N pages costs 2N write system calls. On a virtual
** machine a write call costs about 2 us: more than SQLite's own work for
** a small commit. This shim wraps the default VFS and, for a "-wal" file
** whose database it also opened, gathers frames as SQLite appends them
** inside a write transaction (a header where the previous write, a whole
** page or the log's own header, ended; then the page right after it) and
** writes them in one call:
**
**  - at once when the gathered page is a commit frame's (its header holds
**    the database's size after the commit, per the WAL file format): the
**    write call of the commit's last page returns the outcome, before
**    SQLite publishes the frames in the wal-index for others to read;
**  - before any other write to the log (every write that is not a frame
**    being appended passes straight through, in order), and before every
**    other call on the log, or on its database's locks and shared memory;
**  - when the buffer is full.
**
** Frames that are not a commit's (a large transaction spilling pages
** before its end) may wait until the next call. Should that write fail,
** the failure is kept: every call on the log, and every lock, answers
** SQLITE_IOERR_WRITE (which makes SQLite roll back the whole transaction,
** where SQLITE_FULL may roll back only a statement) until the transaction
** releases the log's write lock; then what was gathered is dropped, as
** SQLite drops those frames. Unlocking always unlocks.
**
** The file holds the same bytes in the same order as without the shim,
** written in fewer calls, and a crash loses only what was never
** committed. The database file's own reads and writes, and every other
** file, pass through untouched.
**
** Registered once, as "kesoku-batch", over the default VFS, by
** kesoku_batch_vfs_register(). A connection uses it by naming it when it
** opens its database.
*/
#include <string.h>
#include "sqlite3.h"

/* The name the shim is registered under. */
#define BATCH_VFS_NAME "kesoku-batch"
/* A frame header's size, per the WAL file format. */
#define FRAME_HEADER 24
/* Writes gathered up to this many bytes (31 frames of 4 KiB): the most
** the unix VFS writes in one call (its seekAndWrite masks a length to 17
** bits). SQLite's own writes are at most a page, 64 KiB. */
#define BATCH_CAPACITY 0x1ffff

typedef struct BatchFile BatchFile;
struct BatchFile {
  sqlite3_file base;      /* Our methods. */
  sqlite3_file *real;     /* The wrapped file, allocated right after us. */
  int is_log;             /* A "-wal" file: its appended frames gathered. */
  BatchFile *log;         /* A database file: its log, while open. */
  BatchFile *db;          /* A log: its database file. */
  unsigned char *buf;     /* Gathered frames (a log only; made lazily). */
  int held;               /* How many bytes buf holds. */
  sqlite3_int64 at;       /* The offset of buf[0] in the file. */
  sqlite3_int64 end;      /* Where the previous write ended, or -1. */
  int last;               /* How many bytes the previous write wrote. */
  int write_locked;       /* A database file: this connection holds its
                          ** log's write lock (the wal-index's lock 0). */
  int header_held;        /* The last bytes held are a frame's header... */
  int commit_header;      /* ...and that frame is a commit's. */
  int err;                /* A gathered write failed: SQLITE_IOERR_WRITE
                          ** until the log's write lock is released. */
};

static sqlite3_vfs batch_vfs;
static sqlite3_io_methods batch_methods[3];

#define REAL(f) (((BatchFile *)(f))->real)

/* Writes the gathered frames; a failure is kept (see the top). */
static int batch_flush(BatchFile *p) {
  int rc;
  if (p->err != SQLITE_OK) return p->err;
  p->header_held = 0;
  if (p->held == 0) return SQLITE_OK;
  rc = p->real->pMethods->xWrite(p->real, p->buf, p->held, p->at);
  p->held = 0;
  if (rc != SQLITE_OK) p->err = SQLITE_IOERR_WRITE;
  return p->err;
}

/* Before a call on a log, or on its database's locks and shared memory. */
static int batch_flush_log_of(BatchFile *p) {
  if (p->log) return batch_flush(p->log);
  if (p->is_log) return batch_flush(p);
  return SQLITE_OK;
}

/* Before a call on a log itself; nothing for a database file's own IO. */
static int batch_flush_log(BatchFile *p) {
  return p->is_log ? batch_flush(p) : SQLITE_OK;
}

static int batch_close(sqlite3_file *f) {
  BatchFile *p = (BatchFile *)f;
  int rc = batch_flush_log_of(p);
  int rc2;
  if (p->is_log && p->db && p->db->log == p) p->db->log = 0;
  if (p->log && p->log->db == p) p->log->db = 0;
  sqlite3_free(p->buf);
  p->buf = 0;
  rc2 = p->real->pMethods->xClose(p->real);
  return rc != SQLITE_OK ? rc : rc2;
}

static int batch_read(sqlite3_file *f, void *out, int n, sqlite3_int64 off) {
  int rc = batch_flush_log((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  return REAL(f)->pMethods->xRead(REAL(f), out, n, off);
}

static int batch_write(sqlite3_file *f, const void *data, int n,
                       sqlite3_int64 off) {
  BatchFile *p = (BatchFile *)f;
  const unsigned char *bytes = (const unsigned char *)data;
  int page, header, commit, rc;
  if (!p->is_log) return p->real->pMethods->xWrite(p->real, data, n, off);
  if (p->err != SQLITE_OK) return p->err;
  /* A frame being appended: its header where the last write ended, or
  ** the page right after a header gathered. */
  page = p->header_held && off == p->at + p->held;
  /* A header follows a whole page, or the log's own 32-byte header at
  ** its start (not the 24-byte tail of a page split at a sync point),
  ** and only inside a write transaction through the shared wal-index
  ** (not with locking_mode=EXCLUSIVE, which has no lock calls to end a
  ** transaction at). */
  header = !page && n == FRAME_HEADER && off == p->end && p->db != 0 &&
           p->db->write_locked &&
           ((p->last == 32 && off == 32) ||
            (p->last >= 512 && p->last <= 65536 && (p->last & (p->last - 1)) == 0));
  commit = page && p->commit_header;
  p->end = off + n;
  p->last = n;
  if (p->buf == 0 && (page || header)) p->buf = sqlite3_malloc(BATCH_CAPACITY);
  if ((!page && !header) || p->buf == 0 || n > BATCH_CAPACITY) {
    /* Anything else goes straight through, after what is held. */
    rc = batch_flush(p);
    if (rc != SQLITE_OK) return rc;
    return p->real->pMethods->xWrite(p->real, data, n, off);
  }
  if (n > BATCH_CAPACITY - p->held) {
    rc = batch_flush(p);
    if (rc != SQLITE_OK) return rc;
  }
  if (p->held == 0) p->at = off;
  memcpy(p->buf + p->held, data, (size_t)n);
  p->held += n;
  /* A header's bytes 4..7: the database's size in pages after a commit,
  ** zero in every other frame. */
  p->header_held = header;
  p->commit_header = header && (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
  return commit ? batch_flush(p) : SQLITE_OK;
}

static int batch_truncate(sqlite3_file *f, sqlite3_int64 size) {
  int rc = batch_flush_log((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int batch_sync(sqlite3_file *f, int flags) {
  int rc = batch_flush_log_of((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int batch_file_size(sqlite3_file *f, sqlite3_int64 *size) {
  int rc = batch_flush_log((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int batch_lock(sqlite3_file *f, int level) {
  int rc = batch_flush_log_of((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  return REAL(f)->pMethods->xLock(REAL(f), level);
}

static int batch_unlock(sqlite3_file *f, int level) {
  /* Unlocking always unlocks: SQLite does not look at the outcome. */
  int rc = batch_flush_log_of((BatchFile *)f);
  int rc2 = REAL(f)->pMethods->xUnlock(REAL(f), level);
  return rc != SQLITE_OK ? rc : rc2;
}

static int batch_check_reserved(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int batch_file_control(sqlite3_file *f, int op, void *arg) {
  int rc = batch_flush_log((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  if (op == SQLITE_FCNTL_VFSNAME) {
    int rc2 = REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
    if (rc2 == SQLITE_OK) {
      char *inner = *(char **)arg;
      *(char **)arg = sqlite3_mprintf(BATCH_VFS_NAME "/%z", inner);
    } else {
      *(char **)arg = sqlite3_mprintf(BATCH_VFS_NAME);
    }
    return SQLITE_OK;
  }
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int batch_sector_size(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int batch_device_characteristics(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int batch_shm_map(sqlite3_file *f, int page, int size, int extend,
                         void volatile **out) {
  int rc = batch_flush_log_of((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  return REAL(f)->pMethods->xShmMap(REAL(f), page, size, extend, out);
}

static int batch_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
  BatchFile *p = (BatchFile *)f;
  int rc = batch_flush_log_of(p);
  int rc2;
  if ((flags & SQLITE_SHM_UNLOCK) == 0) {
    if (rc != SQLITE_OK) return rc;
    rc2 = p->real->pMethods->xShmLock(p->real, offset, n, flags);
    if (rc2 == SQLITE_OK && offset == 0 && (flags & SQLITE_SHM_EXCLUSIVE)) {
      p->write_locked = 1;
    }
    return rc2;
  }
  /* Unlocking always unlocks: SQLite does not look at the outcome. */
  rc2 = p->real->pMethods->xShmLock(p->real, offset, n, flags);
  if (offset == 0) p->write_locked = 0;
  if (offset == 0 && p->log) {
    /* The log's write lock (the wal-index's lock 0) is released: the
    ** transaction is over, and a failure kept for it with it. */
    p->log->err = SQLITE_OK;
    p->log->held = 0;
    p->log->header_held = 0;
  }
  return rc != SQLITE_OK ? rc : rc2;
}

static void batch_shm_barrier(sqlite3_file *f) {
  /* Nothing is held when SQLite publishes a commit (its last page was
  ** written by its own write call); a second line, whose failure is kept
  ** for the calls that follow. */
  (void)batch_flush_log_of((BatchFile *)f);
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int batch_shm_unmap(sqlite3_file *f, int delete_flag) {
  int rc = batch_flush_log_of((BatchFile *)f);
  int rc2 = REAL(f)->pMethods->xShmUnmap(REAL(f), delete_flag);
  return rc != SQLITE_OK ? rc : rc2;
}

static int batch_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out) {
  int rc = batch_flush_log((BatchFile *)f);
  if (rc != SQLITE_OK) return rc;
  return REAL(f)->pMethods->xFetch(REAL(f), off, n, out);
}

static int batch_unfetch(sqlite3_file *f, sqlite3_int64 off, void *page) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), off, page);
}

static sqlite3_vfs *root(void) { return (sqlite3_vfs *)batch_vfs.pAppData; }

static int batch_open(sqlite3_vfs *vfs, sqlite3_filename name,
                      sqlite3_file *f, int flags, int *out_flags) {
  BatchFile *p = (BatchFile *)f;
  sqlite3_vfs *r = root();
  int rc;
  (void)vfs;
  memset(p, 0, sizeof(*p));
  p->real = (sqlite3_file *)&p[1];
  p->end = -1;
  rc = r->xOpen(r, name, p->real, flags, out_flags);
  if (p->real->pMethods == 0) {
    p->base.pMethods = 0;
    return rc;
  }
  {
    int version = p->real->pMethods->iVersion;
    if (version > 3) version = 3;
    if (version < 1) version = 1;
    p->base.pMethods = &batch_methods[version - 1];
  }
  /* Gather a log's writes only where it has shared memory to publish
  ** frames through (version 2 methods) and its database is ours. */
  if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) && name != 0 &&
      p->real->pMethods->iVersion >= 2) {
    sqlite3_file *db = sqlite3_database_file_object(name);
    if (db != 0 && (db->pMethods == &batch_methods[0] ||
                    db->pMethods == &batch_methods[1] ||
                    db->pMethods == &batch_methods[2])) {
      p->is_log = 1;
      p->db = (BatchFile *)db;
      p->db->log = p;
    }
  }
  return rc;
}

static int batch_delete(sqlite3_vfs *v, const char *name, int sync_dir) {
  (void)v;
  return root()->xDelete(root(), name, sync_dir);
}
static int batch_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
  (void)v;
  return root()->xAccess(root(), name, flags, out);
}
static int batch_full_pathname(sqlite3_vfs *v, const char *name, int n,
                               char *out) {
  (void)v;
  return root()->xFullPathname(root(), name, n, out);
}
static void *batch_dl_open(sqlite3_vfs *v, const char *path) {
  (void)v;
  return root()->xDlOpen(root(), path);
}
static void batch_dl_error(sqlite3_vfs *v, int n, char *msg) {
  (void)v;
  root()->xDlError(root(), n, msg);
}
static void (*batch_dl_sym(sqlite3_vfs *v, void *lib, const char *sym))(void) {
  (void)v;
  return root()->xDlSym(root(), lib, sym);
}
static void batch_dl_close(sqlite3_vfs *v, void *lib) {
  (void)v;
  root()->xDlClose(root(), lib);
}
static int batch_randomness(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return root()->xRandomness(root(), n, out);
}
static int batch_sleep(sqlite3_vfs *v, int micros) {
  (void)v;
  return root()->xSleep(root(), micros);
}
static int batch_current_time(sqlite3_vfs *v, double *out) {
  (void)v;
  return root()->xCurrentTime(root(), out);
}
static int batch_get_last_error(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return root()->xGetLastError ? root()->xGetLastError(root(), n, out) : 0;
}
static int batch_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out) {
  (void)v;
  return root()->xCurrentTimeInt64(root(), out);
}
static int batch_set_system_call(sqlite3_vfs *v, const char *name,
                                 sqlite3_syscall_ptr call) {
  (void)v;
  return root()->xSetSystemCall(root(), name, call);
}
static sqlite3_syscall_ptr batch_get_system_call(sqlite3_vfs *v,
                                                 const char *name) {
  (void)v;
  return root()->xGetSystemCall(root(), name);
}
static const char *batch_next_system_call(sqlite3_vfs *v, const char *name) {
  (void)v;
  return root()->xNextSystemCall(root(), name);
}

/* Registers the shim, the first time; under SQLITE_MUTEX_STATIC_APP3. */
static int batch_register(void) {
  sqlite3_vfs *r = sqlite3_vfs_find(0);
  int i;
  if (r == 0 || r->iVersion < 2) return SQLITE_ERROR;
  for (i = 0; i < 3; i++) {
    sqlite3_io_methods *io = &batch_methods[i];
    io->iVersion = i + 1;
    io->xClose = batch_close;
    io->xRead = batch_read;
    io->xWrite = batch_write;
    io->xTruncate = batch_truncate;
    io->xSync = batch_sync;
    io->xFileSize = batch_file_size;
    io->xLock = batch_lock;
    io->xUnlock = batch_unlock;
    io->xCheckReservedLock = batch_check_reserved;
    io->xFileControl = batch_file_control;
    io->xSectorSize = batch_sector_size;
    io->xDeviceCharacteristics = batch_device_characteristics;
    io->xShmMap = i >= 1 ? batch_shm_map : 0;
    io->xShmLock = i >= 1 ? batch_shm_lock : 0;
    io->xShmBarrier = i >= 1 ? batch_shm_barrier : 0;
    io->xShmUnmap = i >= 1 ? batch_shm_unmap : 0;
    io->xFetch = i >= 2 ? batch_fetch : 0;
    io->xUnfetch = i >= 2 ? batch_unfetch : 0;
  }
  batch_vfs.iVersion = r->iVersion > 3 ? 3 : r->iVersion;
  batch_vfs.szOsFile = (int)sizeof(BatchFile) + r->szOsFile;
  batch_vfs.mxPathname = r->mxPathname;
  batch_vfs.zName = BATCH_VFS_NAME;
  batch_vfs.pAppData = r;
  batch_vfs.xOpen = batch_open;
  batch_vfs.xDelete = batch_delete;
  batch_vfs.xAccess = batch_access;
  batch_vfs.xFullPathname = batch_full_pathname;
  batch_vfs.xDlOpen = batch_dl_open;
  batch_vfs.xDlError = batch_dl_error;
  batch_vfs.xDlSym = batch_dl_sym;
  batch_vfs.xDlClose = batch_dl_close;
  batch_vfs.xRandomness = batch_randomness;
  batch_vfs.xSleep = batch_sleep;
  batch_vfs.xCurrentTime = batch_current_time;
  batch_vfs.xGetLastError = batch_get_last_error;
  batch_vfs.xCurrentTimeInt64 = r->iVersion >= 2 ? batch_current_time_int64 : 0;
  batch_vfs.xSetSystemCall = r->iVersion >= 3 ? batch_set_system_call : 0;
  batch_vfs.xGetSystemCall = r->iVersion >= 3 ? batch_get_system_call : 0;
  batch_vfs.xNextSystemCall = r->iVersion >= 3 ? batch_next_system_call : 0;
  return sqlite3_vfs_register(&batch_vfs, 0);
}

/*
** Registers the shim over the default VFS, once: later calls return the
** first one's outcome. SQLITE_OK, or why it could not (no default VFS, or
** one too old to wrap). Safe to call from any thread, at any time.
*/
int kesoku_batch_vfs_register(void) {
  static int done = 0;
  static int result = SQLITE_OK;
  sqlite3_mutex *m;
  int rc = sqlite3_initialize();
  if (rc != SQLITE_OK) return rc;
  m = sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_APP3);
  sqlite3_mutex_enter(m);
  if (!done) {
    result = batch_register();
    done = 1;
  }
  rc = result;
  sqlite3_mutex_leave(m);
  return rc;
}
