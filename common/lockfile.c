/* lockfile.c — see lockfile.h. */
#include "lockfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void gr_lockfile_holder(int fd, char *buf, size_t n) {
    char text[512] = "";
    ssize_t r = pread(fd, text, sizeof text - 1, 0);
    text[r > 0 ? r : 0] = '\0';
    text[strcspn(text, "\n")] = '\0';
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    long kpid = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? (long)fl.l_pid : 0;
    if (text[0]) snprintf(buf, n, "%s", text);
    else if (kpid > 0) snprintf(buf, n, "pid %ld (it has not written its host yet)", kpid);
    else snprintf(buf, n, "a process that has not written its name yet");
}

bool gr_lockfile_held(const char *dir, char *holder, size_t n) {
    char path[1100];
    snprintf(path, sizeof path, "%s/" GR_RUNDIR_LOCK, dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return false;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    bool held = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    if (held && holder) gr_lockfile_holder(fd, holder, n);
    close(fd);
    return held;
}
