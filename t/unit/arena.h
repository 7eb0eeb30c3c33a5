
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The allocator the unit tests and the fuzz targets give the codec: it
 * behaves like an nginx pool (the codec may free a block early, all the
 * rest goes when the arena is destroyed), tracks every block so that
 * LeakSanitizer sees nothing and a bad free stops ASan at once, counts
 * bytes in use and their peak, and fails allocations on demand.
 */


#ifndef _OIP_ARENA_H_INCLUDED_
#define _OIP_ARENA_H_INCLUDED_


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oip_codec.h"


/* no test input is large enough to need this much: a codec bug */
#define ARENA_SIZE_MAX  ((size_t) 1 << 31)


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
    size_t          count;
    size_t          fail_at;      /* the Nth allocation fails; 0: never */
    unsigned        fail_all:1;   /* ... and every one after it */
    unsigned        failed:1;     /* an allocation was refused */
} arena_t;


static void *
arena_alloc(void *data, size_t size)
{
    arena_t        *a = data;
    arena_block_t  *b;

    a->count++;

    if (a->fail_at
        && (a->count == a->fail_at || (a->fail_all && a->count > a->fail_at)))
    {
        a->failed = 1;
        return NULL;
    }

    if (size >= ARENA_SIZE_MAX) {
        fprintf(stderr, "arena: an allocation of %zu bytes\n", size);
        abort();
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

    /* a pointer that is not ours makes ASan stop right here */

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


#endif /* _OIP_ARENA_H_INCLUDED_ */
