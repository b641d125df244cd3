/*
 * Steps the wall clock of one process: an LD_PRELOAD library that adds an offset, read from a file,
 * to CLOCK_REALTIME (clock_gettime, gettimeofday, time) and leaves every other clock alone.
 *
 * Why not libfaketime: told to leave the monotonic clock alone (FAKETIME_DONT_FAKE_MONOTONIC) its
 * clock_nanosleep fails with EINVAL, so Python's time.sleep raises; otherwise it steps the monotonic
 * clock with the wall clock, which no NTP step does.
 *
 * The file named by WALL_CLOCK_SHIM_OFFSET_FILE holds the offset in nanoseconds (a signed
 * decimal). It is read again at most every 10 ms (by the real monotonic clock), so a step written
 * to it reaches the process within 10 ms; a missing or unreadable file means no offset.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define REREAD_NS 10000000LL

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static const char *offset_path;
static _Atomic long long offset_ns;
static _Atomic long long next_read_ns;

__attribute__((constructor)) static void init(void) {
    real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    offset_path = getenv("WALL_CLOCK_SHIM_OFFSET_FILE");
}

static long long monotonic_ns(void) {
    struct timespec ts;
    real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long current_offset_ns(void) {
    if (offset_path == NULL || real_clock_gettime == NULL) {
        return 0;
    }
    long long now = monotonic_ns();
    if (now < atomic_load(&next_read_ns)) {
        return atomic_load(&offset_ns);
    }
    atomic_store(&next_read_ns, now + REREAD_NS);
    long long read_offset = 0;
    int fd = open(offset_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char text[32];
        ssize_t n = read(fd, text, sizeof text - 1);
        close(fd);
        if (n > 0) {
            text[n] = '\0';
            read_offset = strtoll(text, NULL, 10);
        }
    }
    atomic_store(&offset_ns, read_offset);
    return read_offset;
}

static void shift(struct timespec *ts, long long by_ns) {
    long long total = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + by_ns;
    ts->tv_sec = (time_t)(total / 1000000000LL);
    ts->tv_nsec = (long)(total % 1000000000LL);
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000L;
        ts->tv_sec -= 1;
    }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    if (real_clock_gettime == NULL) {
        real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    }
    int result = real_clock_gettime(clock, ts);
    if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        shift(ts, current_offset_ns());
    }
    return result;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    struct timespec ts;
    int result = clock_gettime(CLOCK_REALTIME, &ts);
    if (result == 0 && tv != NULL) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
