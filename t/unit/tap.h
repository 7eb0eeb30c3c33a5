/*
 * Copyright (C) ngx_oip_module authors
 *
 * A few lines of TAP for the codec's unit tests (run by prove), and an
 * arena allocator that behaves like an nginx pool: the codec may free
 * early, everything else goes when the arena is destroyed.
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


typedef struct arena_block_s  arena_block_t;

struct arena_block_s {
    arena_block_t  *prev;
    arena_block_t  *next;
    size_t          size;
    /* 16-byte alignment for what follows, as malloc gives */
    size_t          pad;
};


typedef struct {
    arena_block_t   head;
    size_t          used;
    size_t          peak;
    size_t          fail_after;   /* make the Nth allocation fail; 0: never */
    size_t          count;
} arena_t;


static void *
arena_alloc(void *data, size_t size)
{
    arena_t        *a = data;
    arena_block_t  *b;

    if (a->fail_after && ++a->count >= a->fail_after) {
        return NULL;
    }

    b = malloc(sizeof(arena_block_t) + size);
    if (b == NULL) {
        return NULL;
    }

    b->size = size;
    b->next = a->head.next;
    b->prev = &a->head;

    if (a->head.next) {
        a->head.next->prev = b;
    }

    a->head.next = b;

    a->used += size;
    if (a->used > a->peak) {
        a->peak = a->used;
    }

    return b + 1;
}


static void
arena_free(void *data, void *p)
{
    arena_t        *a = data;
    arena_block_t  *b = (arena_block_t *) p - 1;

    b->prev->next = b->next;

    if (b->next) {
        b->next->prev = b->prev;
    }

    a->used -= b->size;
    free(b);
}


static void
arena_init(arena_t *a, oip_alloc_t *alloc)
{
    memset(a, 0, sizeof(arena_t));

    alloc->alloc = arena_alloc;
    alloc->free = arena_free;
    alloc->data = a;
}


static void
arena_destroy(arena_t *a)
{
    arena_block_t  *b, *next;

    for (b = a->head.next; b; b = next) {
        next = b->next;
        free(b);
    }

    a->head.next = NULL;
    a->used = 0;
}


#endif /* _OIP_TAP_H_INCLUDED_ */
