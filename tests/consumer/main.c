/* SPDX-License-Identifier: BSD-3-Clause */
/* Proves an installed libredlock is usable: find_package, link, call. */
#include <redlock/redlock.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    const char *bad[] = {"http://nowhere"};
    redlock_client *c = NULL;
    int rc = redlock_client_new(&c, bad, 1, NULL);

    printf("libredlock %s: %s (%s)\n", redlock_version(), redlock_err_name(rc),
           redlock_last_error());
    return rc == REDLOCK_EURI && strcmp(redlock_version(), REDLOCK_VERSION_STRING) == 0 ? 0 : 1;
}
