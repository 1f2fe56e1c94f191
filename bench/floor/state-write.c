/*
 * bench/floor/state-write.c — the durable-write floor: the system calls of
 * `triage state-write FILE --update '.n += 1'` and nothing else, as a minimal static C program
 * (bench/run compiles it with gcc -O2 -static). What triage costs above this is its own work
 * (a runtime's start, argument parsing, a jq filter, JSON in and out), not the disk's.
 *
 *   state-write-floor FILE     FILE holds {"n": <integer>} (as triage writes it); n += 1
 *
 * The sequence, call for call as `strace -f` shows triage make it (in FILE's folder):
 *   open the folder; open FILE.lock (created 0600 when missing), flock LOCK_EX;
 *   open FILE, fstat, read to the end, close;
 *   fstatat FILE (no link followed); list the folder (triage removes stale temp files);
 *   create .FILE.tmp-XXXXXXXX (O_EXCL, 0600), fchmod to FILE's mode, write, fsync;
 *   fstatat FILE.bak; unlink FILE.bak.tmp; link FILE -> FILE.bak.tmp; rename it to FILE.bak;
 *   rename the temp file onto FILE; fsync the folder; close; one line on stdout.
 * triage also reads FILE a second time before writing; the floor reads it once.
 * Exit status: 0 written, 1 a step failed (named on stderr), 64 bad usage.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *file;

static int fail(const char *what, const char *name) {
  fprintf(stderr, "state-write-floor: %s %s: %s\n", what, name, strerror(errno));
  return 1;
}

/* The integer after "n": in doc, or -1 when there is none. */
static long long n_of(const char *doc) {
  const char *k = strstr(doc, "\"n\"");
  if (!k) return -1;
  k += 3;
  while (*k == ' ' || *k == '\n' || *k == '\t' || *k == ':') k++;
  if (*k < '0' || *k > '9') return -1;
  return strtoll(k, NULL, 10);
}

int main(int argc, char **argv) {
  if (argc != 2 || strchr(argv[1], '/')) {
    fprintf(stderr, "usage: state-write-floor FILE (a name in the current folder)\n");
    return 64;
  }
  file = argv[1];
  char lock[4096], bak[4096], baktmp[4096], tmp[4096];
  snprintf(lock, sizeof lock, "%s.lock", file);
  snprintf(bak, sizeof bak, "%s.bak", file);
  snprintf(baktmp, sizeof baktmp, "%s.bak.tmp", file);

  int dir = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return fail("cannot open", ".");
  int lk = openat(dir, lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (lk < 0 && errno == ENOENT) lk = openat(dir, lock, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lk < 0) return fail("cannot open", lock);
  if (flock(lk, LOCK_EX) != 0) return fail("cannot lock", lock);

  int in = openat(dir, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return fail("cannot open", file);
  struct stat st;
  if (fstat(in, &st) != 0) return fail("cannot stat", file);
  char doc[8192];
  size_t len = 0;
  for (;;) {
    ssize_t r = read(in, doc + len, sizeof doc - 1 - len);
    if (r < 0) return fail("cannot read", file);
    if (r == 0) break;
    len += (size_t)r;
    if (len == sizeof doc - 1) break;
  }
  doc[len] = 0;
  close(in);
  long long n = n_of(doc);
  if (n < 0) {
    fprintf(stderr, "state-write-floor: %s has no \"n\": <integer>\n", file);
    return 1;
  }
  char out[64];
  int outlen = snprintf(out, sizeof out, "{\n  \"n\": %lld\n}\n", n + 1);

  struct stat cur;
  if (fstatat(dir, file, &cur, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(cur.st_mode))
    return fail("not a regular file:", file);
  /* Stale temp files of a killed writer: the folder is listed, as triage lists it. */
  int ls = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (ls < 0) return fail("cannot list", ".");
  char dents[1536];
  while (syscall(SYS_getdents64, ls, dents, sizeof dents) > 0) {
  }
  close(ls);

  unsigned int rnd;
  if (getrandom(&rnd, sizeof rnd, GRND_INSECURE) != sizeof rnd) rnd = (unsigned int)getpid();
  snprintf(tmp, sizeof tmp, ".%s.tmp-%08x", file, rnd);
  int t = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (t < 0) return fail("cannot create", tmp);
  if (fchmod(t, cur.st_mode & 07777) != 0) return fail("cannot chmod", tmp);
  if (write(t, out, (size_t)outlen) != outlen) return fail("cannot write", tmp);
  if (fsync(t) != 0) return fail("cannot fsync", tmp);

  struct stat b;
  if (fstatat(dir, bak, &b, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(b.st_mode))
    return fail("not a regular file:", bak);
  unlinkat(dir, baktmp, 0);
  if (linkat(dir, file, dir, baktmp, 0) != 0) return fail("cannot link", baktmp);
  if (renameat(dir, baktmp, dir, bak) != 0) return fail("cannot rename onto", bak);
  if (renameat(dir, tmp, dir, file) != 0) return fail("cannot rename onto", file);
  if (fsync(dir) != 0) return fail("cannot fsync", ".");
  close(t);
  close(dir);
  close(lk);
  printf("{\"path\":\"%s\",\"bytes\":%d,\"n\":%lld,\"written\":true}\n", file, outlen, n + 1);
  return 0;
}
