
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The sequence balancer's ring (oip_ring.c): the spread of 10,000 keys
 * over 4 and 5 peers (busiest / least busy <= 1.3, issue 29's target),
 * weights respected, the same ring whatever the peers' order, a peer
 * added moving only the keys it takes, nginx's CRC-32, the wrap.
 */


#include "tap.h"

#include <zlib.h>


#define KEYS  10000


typedef struct {
    arena_t          arena;
    oip_alloc_t      alloc;
    oip_ring_t       ring;
} ring_run_t;


static const char  *names[] = {
    "10.0.0.11:8000", "10.0.0.12:8000", "10.0.0.13:8000", "10.0.0.14:8000",
    "10.0.0.15:8000"
};


static void
build(ring_run_t *rr, const unsigned *order, const unsigned *weights,
    size_t n)
{
    size_t           i;
    oip_ring_peer_t  peers[8];

    for (i = 0; i < n; i++) {
        peers[i].name = (const uint8_t *) names[order[i]];
        peers[i].len = strlen(names[order[i]]);
        peers[i].weight = weights ? weights[i] : 1;
    }

    arena_init(&rr->arena, &rr->alloc);

    if (oip_ring_build(&rr->ring, &rr->alloc, peers, n) != 0) {
        fprintf(stderr, "oip_ring_build failed\n");
        exit(1);
    }
}


/* where key k goes: the name of its peer */

static const char *
place(ring_run_t *rr, const unsigned *order, unsigned k)
{
    char    key[64];
    size_t  len;

    len = snprintf(key, sizeof(key), "speech%ci%u", '\0', k);

    return names[order[rr->ring.points[oip_ring_find(&rr->ring,
                        oip_ring_hash((uint8_t *) key, len))].peer]];
}


static void
spread(size_t n)
{
    unsigned    i, k, count[8], order[8], most, least;
    ring_run_t  rr;

    for (i = 0; i < n; i++) {
        order[i] = i;
        count[i] = 0;
    }

    build(&rr, order, NULL, n);

    ok(rr.ring.n == n * OIP_RING_POINTS, "%zu peers: %zu points", n,
       rr.ring.n);

    for (k = 0; k < KEYS; k++) {
        const char *p = place(&rr, order, k);

        for (i = 0; i < n; i++) {
            if (p == names[i]) {
                count[i]++;
            }
        }
    }

    most = 0;
    least = KEYS;

    for (i = 0; i < n; i++) {
        most = count[i] > most ? count[i] : most;
        least = count[i] < least ? count[i] : least;
    }

    if (!ok(least > 0 && most <= 1.3 * least,
            "%zu peers, %d keys: busiest / least busy %.3f <= 1.3", n, KEYS,
            least ? (double) most / least : 0.0))
    {
        for (i = 0; i < n; i++) {
            diag("%s: %u", names[i], count[i]);
        }
    }

    arena_destroy(&rr.arena);
}


int
main(void)
{
    unsigned    k, moved, to_new, same, heavy;
    unsigned    fwd[5] = {0, 1, 2, 3, 4}, rev[5] = {4, 3, 2, 1, 0};
    unsigned    weights[2] = {3, 1};
    ring_run_t  a, b, c;

    spread(4);
    spread(5);

    /* the peers' order does not matter: the same peer for every key */

    build(&a, fwd, NULL, 4);
    build(&b, rev + 1, NULL, 4);

    for (k = 0, same = 0; k < KEYS; k++) {
        same += (place(&a, fwd, k) == place(&b, rev + 1, k));
    }

    ok(same == KEYS, "the same ring whatever the peers' order (%u of %d)",
       same, KEYS);

    arena_destroy(&b.arena);

    /* a fifth peer takes about a fifth of the keys, from the others, and
     * moves nothing else */

    build(&c, fwd, NULL, 5);

    for (k = 0, moved = 0, to_new = 0; k < KEYS; k++) {
        const char *was = place(&a, fwd, k), *now = place(&c, fwd, k);

        if (was != now) {
            moved++;
            to_new += (now == names[4]);
        }
    }

    ok(moved == to_new && moved > KEYS / 7 && moved < KEYS / 4,
       "a peer added: %u keys moved, all to it", moved);

    arena_destroy(&a.arena);
    arena_destroy(&c.arena);

    /* weights: 3 to 1 */

    build(&a, fwd, weights, 2);

    for (k = 0, heavy = 0; k < KEYS; k++) {
        heavy += (place(&a, fwd, k) == names[0]);
    }

    ok(a.ring.n == 4 * OIP_RING_POINTS && heavy > 0.68 * KEYS
       && heavy < 0.82 * KEYS, "weight 3 against 1: %u of %d keys", heavy,
       KEYS);

    arena_destroy(&a.arena);

    /* nginx's CRC-32 of "123456789" (the check value), and the wrap */

    ok(oip_ring_hash((const uint8_t *) "123456789", 9) == 0xcbf43926,
       "the key's hash is CRC-32");

    build(&a, fwd, NULL, 1);
    ok(oip_ring_find(&a.ring, 0xffffffff) == 0
       || a.ring.points[oip_ring_find(&a.ring, 0xffffffff)].hash
          >= 0xffffffff, "past the last point: the first");
    ok(oip_ring_find(&a.ring, 0) == 0, "before the first point: the first");
    arena_destroy(&a.arena);

    build(&a, fwd, NULL, 0);
    ok(a.ring.n == 0, "no peers, no points");
    arena_destroy(&a.arena);

    return tap_done();
}
