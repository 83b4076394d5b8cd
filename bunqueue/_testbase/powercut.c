/* An SQLite VFS that lets a test take a file back to its content at its last fsync, as a power loss would.
 *
 * Loaded with LD_PRELOAD, a constructor registers it as the default VFS of the process's libsqlite3.so.0,
 * wrapping "unix". Before the first change to a file since its last xSync (a write, a truncate, a size hint)
 * it appends the file's size then, and the time of that sync, to an undo log beside it ("<file>.undo");
 * before every write or truncate it appends the bytes about to be overwritten (those below that size). The
 * log is written with plain write(), so it outlives a SIGKILL of the process: replaying it backwards and
 * truncating to the recorded size gives the file as it was at its last xSync. xSync of the file empties its
 * log once the real sync returned.
 *
 * A file created through xOpen (the WAL, a journal, a new database) exists after a power loss only once its
 * folder was fsynced: until then a marker "<file>.created" says to delete it. fsync()/fdatasync() are
 * interposed for that: a sync of a folder drops the markers of the files created in it.
 *
 * Each change is also logged as it will be (WRITE, TRUNCATE), so that a replay may keep part of the
 * unsynced writes: any subset of their sectors, as a disk that reorders its writes and loses power between
 * two of them would.
 *
 * Limits of the model: a sector (512 bytes) is written whole or not at all; unlink and rename are taken as
 * durable at once; the -shm file is not tracked (it does not survive a power loss: the replay deletes it);
 * only files opened through the VFS are tracked, and memory-mapped I/O is not offered (io methods version 2).
 *
 * Records: a 24-byte header {u32 kind, u32 zero, u64 offset, u64 length} then, for DATA and WRITE, length
 * bytes. SIZE (kind 1): offset = the file's size at its last sync, length = that sync's time in
 * microseconds. DATA (kind 2): the old bytes at offset. WRITE (kind 3): the new bytes at offset. TRUNCATE
 * (kind 4): offset = the new size. A record cut short by the kill is the last one and is ignored: the
 * change it belongs to was not made.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

enum { KIND_SIZE = 1, KIND_DATA = 2, KIND_WRITE = 3, KIND_TRUNCATE = 4, MAX_TRACKED = 64 };

typedef struct {
    uint32_t kind;
    uint32_t zero;
    uint64_t offset;
    uint64_t length;
} Record;

/* One per path, shared by every connection of the process that opens it. */
typedef struct {
    char *path;
    int undo_fd;
    /* The size at the last sync, or -1 while the log is empty (nothing changed since that sync). */
    int64_t epoch_size;
    int64_t synced_us;
    /* Created and its folder not synced yet: the folder's device and inode. */
    int created;
    dev_t dir_dev;
    ino_t dir_ino;
    int opens;
    pthread_mutex_t lock;
} Tracked;

typedef struct {
    sqlite3_file base;
    Tracked *tracked;
    sqlite3_file *real; /* the unix VFS's file, allocated right after this struct */
} ShimFile;

static sqlite3_vfs *unix_vfs;
static sqlite3_vfs shim_vfs;
static sqlite3_io_methods shim_methods;
static Tracked tracked[MAX_TRACKED];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
/* Looked up in the library at load: the shim is not linked against it. */
static char *(*sqlite_mprintf)(const char *, ...);

static int64_t now_us(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void die(const char *what, const char *path) {
    /* A model that silently stops recording would pass tests it should fail. */
    fprintf(stderr, "powercut: %s %s: %s\n", what, path, strerror(errno));
    abort();
}

static char *side_path(const char *path, const char *suffix) {
    size_t n = strlen(path) + strlen(suffix) + 1;
    char *side = malloc(n);
    snprintf(side, n, "%s%s", path, suffix);
    return side;
}

static int64_t file_size(Tracked *t) {
    struct stat st;
    if (stat(t->path, &st) != 0) die("stat", t->path);
    return (int64_t)st.st_size;
}

/* Called with t->lock held before any change: the first one since a sync records the size then. */
static void begin_change(Tracked *t) {
    if (t->epoch_size >= 0) return;
    t->epoch_size = file_size(t);
    Record r = {KIND_SIZE, 0, (uint64_t)t->epoch_size, (uint64_t)t->synced_us};
    if (write_all(t->undo_fd, &r, sizeof r) != 0) die("write undo log of", t->path);
}

/* The bytes of [offset, offset + length) below the size at the last sync, as they are now. */
static void save_old(Tracked *t, int64_t offset, int64_t length) {
    begin_change(t);
    int64_t end = offset + length;
    if (end > t->epoch_size) end = t->epoch_size;
    if (end <= offset) return;
    size_t n = (size_t)(end - offset);
    char *buf = malloc(sizeof(Record) + n);
    Record r = {KIND_DATA, 0, (uint64_t)offset, (uint64_t)n};
    memcpy(buf, &r, sizeof r);
    int fd = open(t->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("open", t->path);
    ssize_t got = pread(fd, buf + sizeof r, n, offset);
    close(fd);
    if (got < 0) die("read", t->path);
    /* Bytes past the current end (a truncate earlier in this epoch) are restored by the earlier record. */
    if ((size_t)got < n) memset(buf + sizeof r + got, 0, n - (size_t)got);
    if (write_all(t->undo_fd, buf, sizeof r + n) != 0) die("write undo log of", t->path);
    free(buf);
}

/* What the change will be, for a replay that keeps part of the unsynced writes. */
static void save_change(Tracked *t, int kind, int64_t offset, const void *bytes, int64_t length) {
    size_t n = bytes != NULL ? (size_t)length : 0;
    char *buf = malloc(sizeof(Record) + n);
    Record r = {(uint32_t)kind, 0, (uint64_t)offset, (uint64_t)length};
    memcpy(buf, &r, sizeof r);
    if (n > 0) memcpy(buf + sizeof r, bytes, n);
    if (write_all(t->undo_fd, buf, sizeof r + n) != 0) die("write undo log of", t->path);
    free(buf);
}

static void synced(Tracked *t) {
    if (ftruncate(t->undo_fd, 0) != 0) die("truncate undo log of", t->path);
    lseek(t->undo_fd, 0, SEEK_SET);
    t->epoch_size = -1;
    t->synced_us = now_us();
}

static void folder_synced(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) return;
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_TRACKED; i++) {
        Tracked *t = &tracked[i];
        if (t->path != NULL && t->created && t->dir_dev == st.st_dev && t->dir_ino == st.st_ino) {
            char *marker = side_path(t->path, ".created");
            unlink(marker);
            free(marker);
            t->created = 0;
        }
    }
    pthread_mutex_unlock(&table_lock);
}

int fsync(int fd) {
    int rc = real_fsync(fd);
    if (rc == 0) folder_synced(fd);
    return rc;
}

int fdatasync(int fd) {
    int rc = real_fdatasync(fd);
    if (rc == 0) folder_synced(fd);
    return rc;
}

static Tracked *track(const char *path, int created) {
    pthread_mutex_lock(&table_lock);
    Tracked *t = NULL, *free_slot = NULL;
    for (int i = 0; i < MAX_TRACKED && t == NULL; i++) {
        if (tracked[i].path != NULL && strcmp(tracked[i].path, path) == 0) t = &tracked[i];
        else if (tracked[i].path == NULL && free_slot == NULL) free_slot = &tracked[i];
    }
    if (t == NULL) {
        if (free_slot == NULL) die("too many files", path);
        t = free_slot;
        t->path = strdup(path);
        char *undo = side_path(path, ".undo");
        t->undo_fd = open(undo, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (t->undo_fd < 0) die("open", undo);
        /* A log left by an earlier open of this process: its first record is the size at the last sync. */
        Record r;
        int rd = open(undo, O_RDONLY | O_CLOEXEC);
        t->epoch_size = -1;
        t->synced_us = now_us();
        if (rd >= 0 && read(rd, &r, sizeof r) == sizeof r && r.kind == KIND_SIZE) {
            t->epoch_size = (int64_t)r.offset;
            t->synced_us = (int64_t)r.length;
        }
        if (rd >= 0) close(rd);
        free(undo);
        pthread_mutex_init(&t->lock, NULL);
        t->created = 0;
    }
    if (created) {
        char *marker = side_path(path, ".created");
        int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) die("open", marker);
        close(fd);
        free(marker);
        char *dir = strdup(path);
        char *slash = strrchr(dir, '/');
        if (slash == dir) slash[1] = '\0';
        else if (slash != NULL) *slash = '\0';
        struct stat st;
        if (stat(slash != NULL ? dir : ".", &st) != 0) die("stat folder of", path);
        free(dir);
        t->created = 1;
        t->dir_dev = st.st_dev;
        t->dir_ino = st.st_ino;
    }
    t->opens++;
    pthread_mutex_unlock(&table_lock);
    return t;
}

static void untrack(Tracked *t) {
    pthread_mutex_lock(&table_lock);
    if (--t->opens == 0) {
        /* The log stays on disk: a later open in this process goes on from it. */
        close(t->undo_fd);
        pthread_mutex_destroy(&t->lock);
        free(t->path);
        t->path = NULL;
    }
    pthread_mutex_unlock(&table_lock);
}

static int shim_close(sqlite3_file *f) {
    ShimFile *s = (ShimFile *)f;
    int rc = s->real->pMethods->xClose(s->real);
    if (s->tracked != NULL) untrack(s->tracked);
    return rc;
}

static int shim_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xRead(s->real, buf, n, off);
}

static int shim_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
    ShimFile *s = (ShimFile *)f;
    if (s->tracked == NULL) return s->real->pMethods->xWrite(s->real, buf, n, off);
    pthread_mutex_lock(&s->tracked->lock);
    save_old(s->tracked, off, n);
    save_change(s->tracked, KIND_WRITE, off, buf, n);
    int rc = s->real->pMethods->xWrite(s->real, buf, n, off);
    pthread_mutex_unlock(&s->tracked->lock);
    return rc;
}

static int shim_truncate(sqlite3_file *f, sqlite3_int64 size) {
    ShimFile *s = (ShimFile *)f;
    if (s->tracked == NULL) return s->real->pMethods->xTruncate(s->real, size);
    pthread_mutex_lock(&s->tracked->lock);
    int64_t now = file_size(s->tracked);
    if (size < now) save_old(s->tracked, size, now - size);
    else begin_change(s->tracked);
    save_change(s->tracked, KIND_TRUNCATE, size, NULL, 0);
    int rc = s->real->pMethods->xTruncate(s->real, size);
    pthread_mutex_unlock(&s->tracked->lock);
    return rc;
}

static int shim_sync(sqlite3_file *f, int flags) {
    ShimFile *s = (ShimFile *)f;
    if (s->tracked == NULL) return s->real->pMethods->xSync(s->real, flags);
    pthread_mutex_lock(&s->tracked->lock);
    int rc = s->real->pMethods->xSync(s->real, flags);
    if (rc == SQLITE_OK) synced(s->tracked);
    pthread_mutex_unlock(&s->tracked->lock);
    return rc;
}

static int shim_file_size(sqlite3_file *f, sqlite3_int64 *size) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xFileSize(s->real, size);
}

static int shim_lock(sqlite3_file *f, int level) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xLock(s->real, level);
}

static int shim_unlock(sqlite3_file *f, int level) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xUnlock(s->real, level);
}

static int shim_check_reserved(sqlite3_file *f, int *out) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xCheckReservedLock(s->real, out);
}

static int shim_file_control(sqlite3_file *f, int op, void *arg) {
    ShimFile *s = (ShimFile *)f;
    if (op == SQLITE_FCNTL_SIZE_HINT && s->tracked != NULL) {
        /* The unix VFS may grow the file here itself, past the size a replay must return to. */
        pthread_mutex_lock(&s->tracked->lock);
        begin_change(s->tracked);
        int rc = s->real->pMethods->xFileControl(s->real, op, arg);
        pthread_mutex_unlock(&s->tracked->lock);
        return rc;
    }
    if (op == SQLITE_FCNTL_VFSNAME) {
        *(char **)arg = sqlite_mprintf("powercut");
        return SQLITE_OK;
    }
    return s->real->pMethods->xFileControl(s->real, op, arg);
}

static int shim_sector_size(sqlite3_file *f) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xSectorSize(s->real);
}

static int shim_device_characteristics(sqlite3_file *f) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xDeviceCharacteristics(s->real);
}

static int shim_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **out) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xShmMap(s->real, page, size, extend, out);
}

static int shim_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xShmLock(s->real, offset, n, flags);
}

static void shim_shm_barrier(sqlite3_file *f) {
    ShimFile *s = (ShimFile *)f;
    s->real->pMethods->xShmBarrier(s->real);
}

static int shim_shm_unmap(sqlite3_file *f, int delete_flag) {
    ShimFile *s = (ShimFile *)f;
    return s->real->pMethods->xShmUnmap(s->real, delete_flag);
}

static int durable_kind(int flags) {
    return flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_SUPER_JOURNAL);
}

static int shim_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags) {
    (void)vfs;
    ShimFile *s = (ShimFile *)f;
    s->real = (sqlite3_file *)(s + 1);
    s->tracked = NULL;
    f->pMethods = NULL;
    /* Temporary files do not outlive a power loss: the unix VFS serves them alone. */
    int durable = name != NULL && durable_kind(flags) && !(flags & SQLITE_OPEN_DELETEONCLOSE);
    /* Held across the open so that of two connections opening a new file at once only one creates it. */
    pthread_mutex_lock(&table_lock);
    int existed = durable && access(name, F_OK) == 0;
    int rc = unix_vfs->xOpen(unix_vfs, name, s->real, flags, out_flags);
    pthread_mutex_unlock(&table_lock);
    if (rc != SQLITE_OK) return rc;
    if (durable) s->tracked = track(name, !existed);
    f->pMethods = &shim_methods;
    return SQLITE_OK;
}

static int shim_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) {
    (void)vfs;
    int rc = unix_vfs->xDelete(unix_vfs, name, sync_dir);
    if (rc == SQLITE_OK) {
        char *undo = side_path(name, ".undo"), *marker = side_path(name, ".created");
        unlink(undo);
        unlink(marker);
        free(undo);
        free(marker);
        pthread_mutex_lock(&table_lock);
        for (int i = 0; i < MAX_TRACKED; i++) {
            Tracked *t = &tracked[i];
            if (t->path != NULL && strcmp(t->path, name) == 0) {
                /* Still open elsewhere: the file is gone, its log starts again. */
                if (ftruncate(t->undo_fd, 0) != 0) die("truncate undo log of", t->path);
                t->epoch_size = -1;
                t->created = 0;
            }
        }
        pthread_mutex_unlock(&table_lock);
    }
    return rc;
}

static int shim_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) {
    (void)vfs;
    return unix_vfs->xAccess(unix_vfs, name, flags, out);
}

static int shim_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out) {
    (void)vfs;
    return unix_vfs->xFullPathname(unix_vfs, name, n, out);
}

static void *shim_dl_open(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return unix_vfs->xDlOpen(unix_vfs, name);
}

static void shim_dl_error(sqlite3_vfs *vfs, int n, char *out) {
    (void)vfs;
    unix_vfs->xDlError(unix_vfs, n, out);
}

static void (*shim_dl_sym(sqlite3_vfs *vfs, void *handle, const char *name))(void) {
    (void)vfs;
    return unix_vfs->xDlSym(unix_vfs, handle, name);
}

static void shim_dl_close(sqlite3_vfs *vfs, void *handle) {
    (void)vfs;
    unix_vfs->xDlClose(unix_vfs, handle);
}

static int shim_randomness(sqlite3_vfs *vfs, int n, char *out) {
    (void)vfs;
    return unix_vfs->xRandomness(unix_vfs, n, out);
}

static int shim_sleep(sqlite3_vfs *vfs, int us) {
    (void)vfs;
    return unix_vfs->xSleep(unix_vfs, us);
}

static int shim_current_time(sqlite3_vfs *vfs, double *out) {
    (void)vfs;
    return unix_vfs->xCurrentTime(unix_vfs, out);
}

static int shim_get_last_error(sqlite3_vfs *vfs, int n, char *out) {
    (void)vfs;
    return unix_vfs->xGetLastError(unix_vfs, n, out);
}

static int shim_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    return unix_vfs->xCurrentTimeInt64(unix_vfs, out);
}

__attribute__((constructor)) static void register_shim(void) {
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    /* The library Python's sqlite3 module and the store's batch writer load later: the same copy. */
    void *lib = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL || real_fsync == NULL || real_fdatasync == NULL) {
        fprintf(stderr, "powercut: cannot load libsqlite3.so.0: %s\n", dlerror());
        abort();
    }
    sqlite3_vfs *(*vfs_find)(const char *) = (sqlite3_vfs * (*)(const char *)) dlsym(lib, "sqlite3_vfs_find");
    int (*vfs_register)(sqlite3_vfs *, int) = (int (*)(sqlite3_vfs *, int))dlsym(lib, "sqlite3_vfs_register");
    char *(*mprintf)(const char *, ...) = (char *(*)(const char *, ...))dlsym(lib, "sqlite3_mprintf");
    unix_vfs = vfs_find != NULL ? vfs_find("unix") : NULL;
    if (unix_vfs == NULL || vfs_register == NULL || mprintf == NULL) {
        fprintf(stderr, "powercut: libsqlite3.so.0 has no unix VFS\n");
        abort();
    }
    sqlite_mprintf = mprintf;
    shim_methods = (sqlite3_io_methods){
        .iVersion = 2,
        .xClose = shim_close,
        .xRead = shim_read,
        .xWrite = shim_write,
        .xTruncate = shim_truncate,
        .xSync = shim_sync,
        .xFileSize = shim_file_size,
        .xLock = shim_lock,
        .xUnlock = shim_unlock,
        .xCheckReservedLock = shim_check_reserved,
        .xFileControl = shim_file_control,
        .xSectorSize = shim_sector_size,
        .xDeviceCharacteristics = shim_device_characteristics,
        .xShmMap = shim_shm_map,
        .xShmLock = shim_shm_lock,
        .xShmBarrier = shim_shm_barrier,
        .xShmUnmap = shim_shm_unmap,
    };
    shim_vfs = *unix_vfs;
    shim_vfs.iVersion = 2;
    shim_vfs.szOsFile = (int)sizeof(ShimFile) + unix_vfs->szOsFile;
    shim_vfs.zName = "powercut";
    shim_vfs.pAppData = NULL;
    shim_vfs.pNext = NULL;
    shim_vfs.xOpen = shim_open;
    shim_vfs.xDelete = shim_delete;
    shim_vfs.xAccess = shim_access;
    shim_vfs.xFullPathname = shim_full_pathname;
    shim_vfs.xDlOpen = shim_dl_open;
    shim_vfs.xDlError = shim_dl_error;
    shim_vfs.xDlSym = shim_dl_sym;
    shim_vfs.xDlClose = shim_dl_close;
    shim_vfs.xRandomness = shim_randomness;
    shim_vfs.xSleep = shim_sleep;
    shim_vfs.xCurrentTime = shim_current_time;
    shim_vfs.xGetLastError = shim_get_last_error;
    shim_vfs.xCurrentTimeInt64 = shim_current_time_int64;
    if (vfs_register(&shim_vfs, 1) != SQLITE_OK) {
        fprintf(stderr, "powercut: registering the VFS failed\n");
        abort();
    }
}
