/* tmp_left.h — whether a writer left a temporary of OUT next to it: OUT.tmp
 * (the fixed name of earlier versions) or OUT.<pid>.<hex>.tmp
 * (common/tmpfile.h). Shared by the converter and dataio fixtures. */
#ifndef GR_TEST_TMP_LEFT_H
#define GR_TEST_TMP_LEFT_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static inline bool gr_tmp_left(const char *out) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s", out);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : out;
    const size_t bl = strlen(base);
    if (slash) *slash = '\0';
    DIR *d = opendir(slash ? dir : ".");
    bool found = false;
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t n = strlen(e->d_name);
        found = found || (n >= bl + 4 && strncmp(e->d_name, base, bl) == 0 && e->d_name[bl] == '.' &&
                          strcmp(e->d_name + n - 4, ".tmp") == 0);
    }
    if (d) closedir(d);
    return found;
}

#endif
