/*
** A VFS for tests that fails one chosen write to a "-wal" file.
**
** Installed once as the default VFS, over the one that was (so under
** kesoku-sqlite's log-batching shim, which wraps the default VFS when it
** registers), it counts the writes that reach a log file and fails the
** armed one: writing the first half of its bytes and answering
** SQLITE_FULL, as the unix VFS does when the disk fills mid-write, or
** writing nothing and answering SQLITE_IOERR_WRITE. Every other call
** passes through.
*/
#include <string.h>
#include "sqlite3.h"

typedef struct FaultFile FaultFile;
struct FaultFile {
  sqlite3_file base;  /* Our methods. */
  sqlite3_file *real; /* The wrapped file, allocated right after us. */
  int is_log;         /* A "-wal" file: its writes are counted. */
};

static sqlite3_vfs fault_vfs;
static sqlite3_vfs *real_vfs;
static sqlite3_io_methods fault_methods[3];
/* Guarded by SQLITE_MUTEX_STATIC_APP2. */
static int armed;   /* Fail the log write of this count; 0: none. */
static int count;   /* Log writes since the last arming. */
static int partial; /* Write half, then SQLITE_FULL; else SQLITE_IOERR_WRITE. */
static int fired;   /* The armed write failed. */

#define REAL(f) (((FaultFile *)(f))->real)

static sqlite3_mutex *state_mutex(void) {
  return sqlite3_mutex_alloc(SQLITE_MUTEX_STATIC_APP2);
}

static int fault_close(sqlite3_file *f) {
  return REAL(f)->pMethods->xClose(REAL(f));
}
static int fault_read(sqlite3_file *f, void *out, int n, sqlite3_int64 off) {
  return REAL(f)->pMethods->xRead(REAL(f), out, n, off);
}
static int fault_write(sqlite3_file *f, const void *data, int n,
                       sqlite3_int64 off) {
  int fail = 0, half = 0, rc;
  if (((FaultFile *)f)->is_log) {
    sqlite3_mutex_enter(state_mutex());
    count++;
    if (armed != 0 && count == armed) {
      fail = 1;
      half = partial;
      fired = 1;
    }
    sqlite3_mutex_leave(state_mutex());
  }
  if (!fail) return REAL(f)->pMethods->xWrite(REAL(f), data, n, off);
  if (!half) return SQLITE_IOERR_WRITE;
  rc = REAL(f)->pMethods->xWrite(REAL(f), data, n / 2, off);
  return rc != SQLITE_OK ? rc : SQLITE_FULL;
}
static int fault_truncate(sqlite3_file *f, sqlite3_int64 size) {
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int fault_sync(sqlite3_file *f, int flags) {
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int fault_file_size(sqlite3_file *f, sqlite3_int64 *size) {
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int fault_lock(sqlite3_file *f, int level) {
  return REAL(f)->pMethods->xLock(REAL(f), level);
}
static int fault_unlock(sqlite3_file *f, int level) {
  return REAL(f)->pMethods->xUnlock(REAL(f), level);
}
static int fault_check_reserved(sqlite3_file *f, int *out) {
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int fault_file_control(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int fault_sector_size(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int fault_device_characteristics(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int fault_shm_map(sqlite3_file *f, int region, int size, int extend,
                         void volatile **out) {
  return REAL(f)->pMethods->xShmMap(REAL(f), region, size, extend, out);
}
static int fault_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
  return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}
static void fault_shm_barrier(sqlite3_file *f) {
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int fault_shm_unmap(sqlite3_file *f, int delete_flag) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), delete_flag);
}
static int fault_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out) {
  return REAL(f)->pMethods->xFetch(REAL(f), off, n, out);
}
static int fault_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static int fault_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f,
                      int flags, int *out_flags) {
  FaultFile *p = (FaultFile *)f;
  int rc, version;
  (void)v;
  memset(p, 0, sizeof(FaultFile));
  p->real = (sqlite3_file *)&p[1];
  rc = real_vfs->xOpen(real_vfs, name, p->real, flags, out_flags);
  if (p->real->pMethods == 0) {
    /* SQLite calls no method of a file whose open set none. */
    f->pMethods = 0;
    return rc;
  }
  version = p->real->pMethods->iVersion;
  f->pMethods = &fault_methods[version < 1 ? 0 : version > 3 ? 2 : version - 1];
  p->is_log = (flags & SQLITE_OPEN_WAL) != 0;
  return rc;
}

/*
** Makes the fault VFS the default, over the default of the moment, once.
** SQLITE_OK, or why not.
*/
int kesoku_fault_vfs_install(void) {
  static int done = 0;
  static int result = SQLITE_OK;
  int rc = sqlite3_initialize();
  int i;
  if (rc != SQLITE_OK) return rc;
  sqlite3_mutex_enter(state_mutex());
  if (!done) {
    done = 1;
    real_vfs = sqlite3_vfs_find(0);
    if (real_vfs == 0 || real_vfs->iVersion < 2) {
      result = SQLITE_ERROR;
    } else {
      for (i = 0; i < 3; i++) {
        sqlite3_io_methods *io = &fault_methods[i];
        io->iVersion = i + 1;
        io->xClose = fault_close;
        io->xRead = fault_read;
        io->xWrite = fault_write;
        io->xTruncate = fault_truncate;
        io->xSync = fault_sync;
        io->xFileSize = fault_file_size;
        io->xLock = fault_lock;
        io->xUnlock = fault_unlock;
        io->xCheckReservedLock = fault_check_reserved;
        io->xFileControl = fault_file_control;
        io->xSectorSize = fault_sector_size;
        io->xDeviceCharacteristics = fault_device_characteristics;
        io->xShmMap = i >= 1 ? fault_shm_map : 0;
        io->xShmLock = i >= 1 ? fault_shm_lock : 0;
        io->xShmBarrier = i >= 1 ? fault_shm_barrier : 0;
        io->xShmUnmap = i >= 1 ? fault_shm_unmap : 0;
        io->xFetch = i >= 2 ? fault_fetch : 0;
        io->xUnfetch = i >= 2 ? fault_unfetch : 0;
      }
      /* The wrapped VFS's other methods, called with our struct: it has
      ** the same pAppData and mxPathname, which is all they read. */
      fault_vfs = *real_vfs;
      fault_vfs.pNext = 0;
      fault_vfs.szOsFile = (int)sizeof(FaultFile) + real_vfs->szOsFile;
      fault_vfs.zName = "kesoku-fault";
      fault_vfs.xOpen = fault_open;
      result = sqlite3_vfs_register(&fault_vfs, 1);
    }
  }
  rc = result;
  sqlite3_mutex_leave(state_mutex());
  return rc;
}

/*
** From now, fails the log write of count `nth` (1 is the next one; 0
** fails none), by half a write and SQLITE_FULL if `half`.
*/
void kesoku_fault_vfs_arm(int nth, int half) {
  sqlite3_mutex_enter(state_mutex());
  armed = nth;
  partial = half;
  count = 0;
  fired = 0;
  sqlite3_mutex_leave(state_mutex());
}

/* The log writes since the last arming. */
int kesoku_fault_vfs_writes(void) {
  int n;
  sqlite3_mutex_enter(state_mutex());
  n = count;
  sqlite3_mutex_leave(state_mutex());
  return n;
}

/* Whether the armed write failed. */
int kesoku_fault_vfs_fired(void) {
  int n;
  sqlite3_mutex_enter(state_mutex());
  n = fired;
  sqlite3_mutex_leave(state_mutex());
  return n;
}
