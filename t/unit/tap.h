/*
 * Copyright (C) ngx_oip_module authors
 *
 * A few lines of TAP for the codec's unit tests (run by prove), and the
 * arena allocator they give the codec (arena.h).
 */


#ifndef _OIP_TAP_H_INCLUDED_
#define _OIP_TAP_H_INCLUDED_


#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oip_codec.h"
#include "arena.h"


static int  tap_n, tap_failed;


static int
tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
    char     name[512], *p;
    va_list  args;

    tap_n++;

    va_start(args, fmt);
    vsnprintf(name, sizeof(name), fmt, args);
    va_end(args);

    /* one line per test, whatever the name holds */
    for (p = name; *p; p++) {
        if ((unsigned char) *p < 0x20) {
            *p = '?';
        }
    }

    printf("%sok %d - %s\n", cond ? "" : "not ", tap_n, name);

    if (!cond) {
        tap_failed++;
        printf("#   Failed at %s line %d\n", file, line);
    }

    fflush(stdout);

    return cond;
}


#define ok(cond, ...)        tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define diag(...)            (printf("# "), printf(__VA_ARGS__), printf("\n"))


static int
tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}


#endif /* _OIP_TAP_H_INCLUDED_ */
