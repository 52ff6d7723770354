/*
 * cowork-asagent UID GID PROGRAM [ARG...]
 *
 * Runs PROGRAM as the agent: no supplementary groups, then GID and UID as real, effective
 * and saved ids (which empties every capability set), then exec. What
 * `setpriv --reuid=UID --regid=GID --clear-groups -- PROGRAM` does, as a small static
 * binary: no dynamic loader, no locale set-up, about a third of setpriv's exec time. The
 * in-container server (root) starts agent commands through it; for anyone else it fails
 * before running anything. Exit status 127 when it cannot drop or exec.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long id_arg(const char *s) {
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || !*s || *end || v == 0 || v > 0x7fffffffUL) {
        fprintf(stderr, "cowork-asagent: not a non-root id: %s\n", s);
        exit(127);
    }
    return v;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fputs("usage: cowork-asagent UID GID PROGRAM [ARG...]\n", stderr);
        return 127;
    }
    uid_t uid = (uid_t)id_arg(argv[1]);
    gid_t gid = (gid_t)id_arg(argv[2]);
    if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
        perror("cowork-asagent: dropping to the agent's ids");
        return 127;
    }
    uid_t r, e, s;
    gid_t gr, ge, gs;
    if (getresuid(&r, &e, &s) != 0 || r != uid || e != uid || s != uid ||
        getresgid(&gr, &ge, &gs) != 0 || gr != gid || ge != gid || gs != gid ||
        setresuid(0, 0, 0) == 0) {  /* root must be out of reach now */
        fputs("cowork-asagent: the ids did not drop\n", stderr);
        return 127;
    }
    execv(argv[3], argv + 3);
    fprintf(stderr, "cowork-asagent: %s: %s\n", argv[3], strerror(errno));
    return 127;
}
