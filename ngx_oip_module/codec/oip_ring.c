
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The consistent-hashing ring of the sequence balancer: each peer gets
 * OIP_RING_POINTS points a unit of weight, each the CRC-32 of its name
 * and the point before it, as nginx's own "hash ... consistent" makes
 * them; ties broken by the names, so that every gateway given the same
 * peers builds the same ring, whatever order it lists them in.  A key
 * goes to the first point at or after its CRC-32.  zlib's crc32() is
 * the CRC nginx computes (ngx_crc32_long()).
 */


#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "oip_codec.h"


static int oip_ring_cmp(const void *one, const void *two);
static int oip_ring_names(const oip_ring_peer_t *a, const oip_ring_peer_t *b);


int
oip_ring_build(oip_ring_t *ring, const oip_alloc_t *a,
    const oip_ring_peer_t *peers, size_t npeers)
{
    size_t        i, j, k, n, *order, *rank;
    uint32_t      hash;
    uint8_t       prev[4];

    ring->points = NULL;
    ring->n = 0;

    for (i = 0, n = 0; i < npeers; i++) {
        n += (size_t) peers[i].weight * OIP_RING_POINTS;
    }

    if (n == 0) {
        return 0;
    }

    ring->points = a->alloc(a->data, n * sizeof(oip_ring_point_t));
    order = a->alloc(a->data, 2 * npeers * sizeof(size_t));

    if (ring->points == NULL || order == NULL) {
        return -1;
    }

    /* each peer's rank by name: an insertion sort, peers are few */

    rank = order + npeers;

    for (i = 0; i < npeers; i++) {
        for (j = i; j > 0 && oip_ring_names(&peers[order[j - 1]],
                                            &peers[i]) > 0; j--)
        {
            order[j] = order[j - 1];
        }

        order[j] = i;
    }

    for (i = 0; i < npeers; i++) {
        rank[order[i]] = i;
    }

    for (i = 0, k = 0; i < npeers; i++) {
        memset(prev, 0, 4);

        for (j = 0; j < (size_t) peers[i].weight * OIP_RING_POINTS; j++) {
            hash = (uint32_t) crc32(0, peers[i].name, (uInt) peers[i].len);
            hash = (uint32_t) crc32(hash, prev, 4);

            ring->points[k].hash = hash;
            ring->points[k].peer = (uint32_t) rank[i];
            k++;

            prev[0] = (uint8_t) (hash & 0xff);
            prev[1] = (uint8_t) ((hash >> 8) & 0xff);
            prev[2] = (uint8_t) ((hash >> 16) & 0xff);
            prev[3] = (uint8_t) ((hash >> 24) & 0xff);
        }
    }

    qsort(ring->points, n, sizeof(oip_ring_point_t), oip_ring_cmp);

    /* back from ranks to the caller's indexes */

    for (k = 0; k < n; k++) {
        ring->points[k].peer = (uint32_t) order[ring->points[k].peer];
    }

    ring->n = n;

    if (a->free) {
        a->free(a->data, order);
    }

    return 0;
}


uint32_t
oip_ring_hash(const uint8_t *key, size_t len)
{
    return (uint32_t) crc32(0, key, (uInt) len);
}


/* the first point at or after hash, wrapped round: its index */

size_t
oip_ring_find(const oip_ring_t *ring, uint32_t hash)
{
    size_t  lo, hi, k;

    lo = 0;
    hi = ring->n;

    while (lo < hi) {
        k = lo + (hi - lo) / 2;

        if (ring->points[k].hash < hash) {
            lo = k + 1;

        } else {
            hi = k;
        }
    }

    return (ring->n && lo == ring->n) ? 0 : lo;
}


static int
oip_ring_cmp(const void *one, const void *two)
{
    const oip_ring_point_t  *a = one, *b = two;

    if (a->hash != b->hash) {
        return (a->hash < b->hash) ? -1 : 1;
    }

    return (a->peer > b->peer) - (a->peer < b->peer);
}


static int
oip_ring_names(const oip_ring_peer_t *a, const oip_ring_peer_t *b)
{
    int  rc;

    rc = memcmp(a->name, b->name, a->len < b->len ? a->len : b->len);

    if (rc != 0) {
        return rc;
    }

    return (a->len > b->len) - (a->len < b->len);
}
