
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The sequence balancer (oip_sequence, in upstream {}): every request of
 * a stateful sequence (Triton's sequence batcher: the request-level
 * sequence_id, sequence_start, sequence_end) reaches the runtime that
 * holds its state.  A new sequence is placed by consistent hashing of
 * its key over the peers' addresses, so that gateways with the same
 * upstream agree without talking, then pinned in a shared zone that
 * every worker reads and a reload keeps.  A pin is lost only when its
 * peer fails (a connect error or timeout, down, gone): the sequence is
 * then refused with a 503 until it starts anew, never moved.  Requests
 * without a sequence go by nginx's weighted round robin.
 */


#include "ngx_http_oip_module.h"


#define NGX_HTTP_OIP_SEQ_PINNED   1
#define NGX_HTTP_OIP_SEQ_LOST     2
#define NGX_HTTP_OIP_SEQ_UNPIN    3     /* to mark(): gone, not ended */

/* how many of the least recently used a full zone looks at for one that
 * is idle or lost before it evicts a live pin */
#define NGX_HTTP_OIP_SEQ_SCAN     16


struct ngx_http_oip_seq_conf_s {
    ngx_shm_zone_t                    *zone;
    ngx_msec_t                         idle;
    oip_ring_t                         ring;    /* the codec's */
    ngx_str_t                        **names;   /* its peers' */
};


/* a sequence's pin, or its tombstone: the key, then the peer's name */

typedef struct {
    ngx_str_node_t                     sn;
    ngx_queue_t                        lru;
    ngx_msec_t                         used;
    u_char                             state;
    u_char                             peer_len;
    u_char                             data[1];
} ngx_http_oip_seq_node_t;


typedef struct {
    ngx_rbtree_t                       rbtree;
    ngx_rbtree_node_t                  sentinel;
    ngx_queue_t                        lru;
} ngx_http_oip_seq_sh_t;


typedef struct {
    ngx_http_oip_seq_sh_t             *sh;
    ngx_slab_pool_t                   *shpool;
    ngx_msec_t                         idle;    /* its upstream's */
} ngx_http_oip_seq_zone_t;


typedef struct {
    /* the round robin's data first: its functions take it */
    ngx_http_upstream_rr_peer_data_t   rrp;
    ngx_http_oip_seq_conf_t           *conf;
    ngx_http_oip_ctx_t                *ctx;
    ngx_http_request_t                *r;
    ngx_log_t                         *log;
    ngx_str_t                          key;     /* empty: no sequence */
    uint32_t                           hash;
    u_char                             peer[NGX_SOCKADDR_STRLEN];
    size_t                             peer_len;   /* pinned to it */
    unsigned                           lost:1;
    unsigned                           placed:1;   /* by this request */
} ngx_http_oip_seq_peer_t;


static ngx_int_t ngx_http_oip_seq_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_oip_seq_init(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_oip_seq_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_oip_seq_key(ngx_http_request_t *r,
    ngx_http_oip_seq_peer_t *sp);
static ngx_int_t ngx_http_oip_seq_get(ngx_peer_connection_t *pc,
    void *data);
static ngx_http_upstream_rr_peer_t *ngx_http_oip_seq_place(
    ngx_http_oip_seq_peer_t *sp);
static ngx_http_upstream_rr_peer_t *ngx_http_oip_seq_find(
    ngx_http_oip_seq_peer_t *sp, u_char *name, size_t len, ngx_uint_t *n);
static ngx_int_t ngx_http_oip_seq_refuse(ngx_peer_connection_t *pc,
    ngx_http_oip_seq_peer_t *sp);
static void ngx_http_oip_seq_free(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state);
static ngx_http_oip_seq_node_t *ngx_http_oip_seq_lookup(
    ngx_http_oip_seq_peer_t *sp, ngx_http_oip_seq_zone_t *z);
static ngx_http_oip_seq_node_t *ngx_http_oip_seq_pin(
    ngx_http_oip_seq_zone_t *z, ngx_http_oip_seq_peer_t *sp, u_char state,
    ngx_log_t *log);
static void ngx_http_oip_seq_delete(ngx_http_oip_seq_zone_t *z,
    ngx_http_oip_seq_node_t *node);
static void ngx_http_oip_seq_mark(ngx_http_oip_seq_peer_t *sp, u_char state,
    ngx_log_t *log);
static void ngx_http_oip_seq_count(ngx_http_oip_seq_peer_t *sp,
    ngx_http_oip_seq_node_t *node, ngx_uint_t end);


static ngx_uint_t  ngx_http_oip_seq_tag;


/* oip_sequence zone=NAME:SIZE [idle=TIME], in upstream {} */

char *
ngx_http_oip_sequence(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_oip_srv_conf_t *oscf = conf;

    char                          *rv;
    ngx_shm_zone_t               **zp;
    ngx_http_oip_main_conf_t      *omcf;
    ssize_t                        size;
    ngx_str_t                     *value, name, s;
    ngx_uint_t                     i;
    ngx_shm_zone_t                *shm_zone;
    ngx_http_oip_seq_conf_t       *sc;
    ngx_http_oip_seq_zone_t       *z;
    ngx_http_upstream_srv_conf_t  *uscf;

    if (oscf->sequence) {
        return "is duplicate";
    }

    value = cf->args->elts;

    sc = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_seq_conf_t));
    if (sc == NULL) {
        return NGX_CONF_ERROR;
    }

    /* Triton's max_sequence_idle_microseconds is 1 s by default and
     * seldom set above a minute: a pin outlives the runtime's slot */
    sc->idle = 300000;
    shm_zone = NULL;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {
            rv = ngx_http_oip_zone_arg(cf, &value[i], &name, &size);
            if (rv != NGX_CONF_OK) {
                return rv;
            }

            if (size < (ssize_t) (8 * ngx_pagesize)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "zone \"%V\" is too small: it needs %uzk "
                                   "at least", &name,
                                   8 * ngx_pagesize / 1024);
                return NGX_CONF_ERROR;
            }

            shm_zone = ngx_shared_memory_add(cf, &name, size,
                                             &ngx_http_oip_seq_tag);
            if (shm_zone == NULL) {
                return NGX_CONF_ERROR;
            }

            if (shm_zone->data) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "zone \"%V\" is already used", &name);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "idle=", 5) == 0) {
            s.data = value[i].data + 5;
            s.len = value[i].len - 5;

            sc->idle = ngx_parse_time(&s, 0);

            if (sc->idle == (ngx_msec_t) NGX_ERROR || sc->idle == 0) {
                goto invalid;
            }

            continue;
        }

        goto invalid;
    }

    if (shm_zone == NULL) {
        return "takes zone=NAME:SIZE";
    }

    z = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_seq_zone_t));
    if (z == NULL) {
        return NGX_CONF_ERROR;
    }

    z->idle = sc->idle;
    shm_zone->init = ngx_http_oip_seq_init_zone;
    shm_zone->data = z;
    sc->zone = shm_zone;
    oscf->sequence = sc;

    /* for the metrics' gauge */

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_oip_module);

    if (omcf->sequences == NULL) {
        omcf->sequences = ngx_array_create(cf->pool, 2,
                                           sizeof(ngx_shm_zone_t *));
        if (omcf->sequences == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    zp = ngx_array_push(omcf->sequences);
    if (zp == NULL) {
        return NGX_CONF_ERROR;
    }

    *zp = shm_zone;

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    uscf->peer.init_upstream = ngx_http_oip_seq_init;

    /* no backup: a sequence never moves to one */
    uscf->flags = NGX_HTTP_UPSTREAM_CREATE
                  |NGX_HTTP_UPSTREAM_WEIGHT
                  |NGX_HTTP_UPSTREAM_MAX_CONNS
                  |NGX_HTTP_UPSTREAM_MAX_FAILS
                  |NGX_HTTP_UPSTREAM_FAIL_TIMEOUT
                  |NGX_HTTP_UPSTREAM_DOWN;

    return NGX_CONF_OK;

invalid:

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid parameter \"%V\"",
                       &value[i]);

    return NGX_CONF_ERROR;
}


/* a reload with the same name and size keeps every pin */

static ngx_int_t
ngx_http_oip_seq_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_int_t                 rc;
    ngx_http_oip_seq_zone_t  *z;

    rc = ngx_http_oip_zone_header(shm_zone, data,
                                  sizeof(ngx_http_oip_seq_sh_t));
    if (rc != NGX_DONE) {
        return rc;
    }

    z = shm_zone->data;

    ngx_rbtree_init(&z->sh->rbtree, &z->sh->sentinel,
                    ngx_str_rbtree_insert_value);
    ngx_queue_init(&z->sh->lru);

    z->shpool->log_nomem = 0;

    return NGX_OK;
}


/*
 * The ring (oip_ring.c), from the peers' addresses, not the server's
 * name, which may stand for several: each gateway with the same servers
 * builds the same ring.
 */

static ngx_int_t
ngx_http_oip_seq_init(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    ngx_uint_t                     i, n;
    oip_alloc_t                    alloc;
    oip_ring_peer_t               *rp;
    ngx_http_oip_srv_conf_t       *oscf;
    ngx_http_oip_seq_conf_t       *sc;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    if (ngx_http_upstream_init_round_robin(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }

    us->peer.init = ngx_http_oip_seq_init_peer;

    oscf = ngx_http_conf_upstream_srv_conf(us, ngx_http_oip_module);
    sc = oscf->sequence;

    peers = us->peer.data;

    rp = ngx_palloc(cf->pool, peers->number * sizeof(oip_ring_peer_t));
    sc->names = ngx_palloc(cf->pool, peers->number * sizeof(ngx_str_t *));

    if (rp == NULL || sc->names == NULL) {
        return NGX_ERROR;
    }

    for (peer = peers->peer, n = 0; peer && n < peers->number;
         peer = peer->next, n++)
    {
        rp[n].name = peer->name.data;
        rp[n].len = peer->name.len;
        rp[n].weight = (unsigned) peer->weight;
        sc->names[n] = &peer->name;
    }

    ngx_http_oip_pool_allocator(cf->pool, &alloc);

    if (oip_ring_build(&sc->ring, &alloc, rp, n) != 0) {
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, cf->log, 0,
                       "oip: sequence ring: %V, weight %ui",
                       sc->names[i], (ngx_uint_t) rp[i].weight);
    }

    return NGX_OK;
}


/* a request: its sequence, if it has one, found pinned or lost */

static ngx_int_t
ngx_http_oip_seq_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_oip_srv_conf_t  *oscf;
    ngx_http_oip_seq_peer_t  *sp;
    ngx_http_oip_seq_node_t  *node;
    ngx_http_oip_seq_zone_t  *z;

    sp = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_seq_peer_t));
    if (sp == NULL) {
        return NGX_ERROR;
    }

    r->upstream->peer.data = &sp->rrp;

    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }

    r->upstream->peer.get = ngx_http_oip_seq_get;
    r->upstream->peer.free = ngx_http_oip_seq_free;

    oscf = ngx_http_conf_upstream_srv_conf(us, ngx_http_oip_module);
    sp->conf = oscf->sequence;

    /* a signature's fetch, a call without a sequence: round robin */

    sp->ctx = (r == r->main) ? ngx_http_oip_get_ctx(r) : NULL;

    if (sp->ctx == NULL || !sp->ctx->vars.counted
        || !sp->ctx->vars.has_sequence)
    {
        return NGX_OK;
    }

    if (ngx_http_oip_seq_key(r, sp) != NGX_OK) {
        return NGX_ERROR;
    }

    /* found again by the response path: keepalive wraps the peer's
     * functions and data, so r->upstream->peer cannot tell */
    sp->ctx->req.sequence = sp;

    sp->r = r;
    sp->log = r->connection->log;
    z = sp->conf->zone->data;

    ngx_shmtx_lock(&z->shpool->mutex);

    node = ngx_http_oip_seq_lookup(sp, z);

    if (node && node->state == NGX_HTTP_OIP_SEQ_LOST
        && sp->ctx->vars.sequence_start)
    {
        /* a lost sequence starts anew: placed again (a pinned one
         * restarts on its runtime, as Triton restarts it in its slot) */
        ngx_http_oip_seq_delete(z, node);
        node = NULL;
    }

    if (node) {
        node->used = ngx_current_msec;
        ngx_queue_remove(&node->lru);
        ngx_queue_insert_head(&z->sh->lru, &node->lru);

        if (node->state == NGX_HTTP_OIP_SEQ_LOST) {
            sp->lost = 1;

        } else {
            sp->peer_len = node->peer_len;
            ngx_memcpy(sp->peer, node->data + node->sn.str.len,
                       node->peer_len);
        }
    }

    ngx_shmtx_unlock(&z->shpool->mutex);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: sequence key \"%V\": %s%*s",
                   &sp->key, sp->lost ? "lost" : sp->peer_len ? "pinned to "
                   : "new", sp->peer_len, sp->peer);

    return NGX_OK;
}


/*
 * The sequence's key: the model, then the id with its type (Triton's
 * integer 1 and string "1" are two sequences).  Versions share it: a
 * sequence stays on one runtime whatever version its requests name.
 */

static ngx_int_t
ngx_http_oip_seq_key(ngx_http_request_t *r, ngx_http_oip_seq_peer_t *sp)
{
    u_char              *p;
    size_t               len;
    ngx_http_oip_ctx_t  *ctx;

    ctx = sp->ctx;

    len = ctx->model.len + 2 + (ctx->vars.sequence_str.len
                                ? ctx->vars.sequence_str.len
                                : NGX_INT64_LEN);

    p = ngx_pnalloc(r->pool, len);
    if (p == NULL) {
        return NGX_ERROR;
    }

    sp->key.data = p;

    p = ngx_cpymem(p, ctx->model.data, ctx->model.len);
    *p++ = '\0';

    if (ctx->vars.sequence_str.len) {
        *p++ = 's';
        p = ngx_cpymem(p, ctx->vars.sequence_str.data,
                       ctx->vars.sequence_str.len);

    } else {
        *p++ = 'i';
        p = ngx_sprintf(p, "%uL", ctx->vars.sequence_id);
    }

    sp->key.len = p - sp->key.data;

    /* the zone keeps a key's length in a byte beside the peer's */
    if (sp->key.len > 65535) {
        sp->key.len = 65535;
    }

    sp->hash = oip_ring_hash(sp->key.data, sp->key.len);

    return NGX_OK;
}


static ngx_int_t
ngx_http_oip_seq_get(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_oip_seq_peer_t *sp = data;

    time_t                         now;
    uintptr_t                      m;
    ngx_uint_t                     n;
    ngx_http_upstream_rr_peer_t   *peer;

    if (sp->key.len == 0) {
        return ngx_http_upstream_get_round_robin_peer(pc, &sp->rrp);
    }

    if (sp->lost) {
        return ngx_http_oip_seq_refuse(pc, sp);
    }

    if (sp->peer_len == 0) {
        /* new: placed on the ring, pinned (or found pinned meanwhile) */

        if (ngx_http_oip_seq_place(sp) == NULL) {
            pc->name = sp->rrp.peers->name;
            return NGX_BUSY;
        }

        sp->placed = 1;

        if (sp->lost) {
            return ngx_http_oip_seq_refuse(pc, sp);
        }
    }

    now = ngx_time();

    ngx_http_upstream_rr_peers_wlock(sp->rrp.peers);

    peer = ngx_http_oip_seq_find(sp, sp->peer, sp->peer_len, &n);

    if (peer == NULL) {
        ngx_http_upstream_rr_peers_unlock(sp->rrp.peers);

        /* down, failing, tried, or gone by a reload: never another */

        ngx_log_error(NGX_LOG_WARN, pc->log, 0,
                      "oip: sequence \"%V\" of model \"%V\": its runtime "
                      "%*s is unavailable: the sequence is lost", &sp->key,
                      &sp->ctx->model, sp->peer_len, sp->peer);

        ngx_http_oip_seq_mark(sp, NGX_HTTP_OIP_SEQ_LOST, pc->log);

        return ngx_http_oip_seq_refuse(pc, sp);
    }

    sp->rrp.current = peer;

    pc->sockaddr = peer->sockaddr;
    pc->socklen = peer->socklen;
    pc->name = &peer->name;
    pc->cached = 0;
    pc->connection = NULL;

    peer->conns++;

    if (now - peer->checked > peer->fail_timeout) {
        peer->checked = now;
    }

    ngx_http_upstream_rr_peers_unlock(sp->rrp.peers);

    m = (uintptr_t) 1 << n % (8 * sizeof(uintptr_t));
    sp->rrp.tried[n / (8 * sizeof(uintptr_t))] |= m;

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                   "oip: sequence \"%V\" to %V", &sp->key, &peer->name);

    return NGX_OK;
}


/*
 * A new sequence's peer: the first usable one from its point on the
 * ring; pinned there unless another worker or request pinned it first,
 * whose pin it takes.  NULL: no usable peer at all.
 */

static ngx_http_upstream_rr_peer_t *
ngx_http_oip_seq_place(ngx_http_oip_seq_peer_t *sp)
{
    ngx_str_t                     *name;
    ngx_uint_t                     i, start, n;
    ngx_http_oip_seq_conf_t       *sc;
    ngx_http_oip_seq_node_t       *node;
    ngx_http_oip_seq_zone_t       *z;
    ngx_http_upstream_rr_peer_t   *peer;

    sc = sp->conf;

    start = oip_ring_find(&sc->ring, sp->hash);
    peer = NULL;

    ngx_http_upstream_rr_peers_rlock(sp->rrp.peers);

    for (i = 0; i < sc->ring.n; i++) {
        name = sc->names[sc->ring.points[(start + i) % sc->ring.n].peer];

        peer = ngx_http_oip_seq_find(sp, name->data, name->len, &n);

        if (peer) {
            sp->peer_len = name->len;
            ngx_memcpy(sp->peer, name->data, name->len);
            break;
        }
    }

    ngx_http_upstream_rr_peers_unlock(sp->rrp.peers);

    if (peer == NULL) {
        return NULL;
    }

    z = sc->zone->data;

    ngx_shmtx_lock(&z->shpool->mutex);

    node = ngx_http_oip_seq_lookup(sp, z);

    if (node == NULL) {
        (void) ngx_http_oip_seq_pin(z, sp, NGX_HTTP_OIP_SEQ_PINNED, sp->log);

    } else if (node->state == NGX_HTTP_OIP_SEQ_LOST) {
        sp->lost = 1;

    } else {
        sp->peer_len = node->peer_len;
        ngx_memcpy(sp->peer, node->data + node->sn.str.len, node->peer_len);
    }

    ngx_shmtx_unlock(&z->shpool->mutex);

    return peer;
}


/* a usable peer by its address (peers locked); *n its index */

static ngx_http_upstream_rr_peer_t *
ngx_http_oip_seq_find(ngx_http_oip_seq_peer_t *sp, u_char *name, size_t len,
    ngx_uint_t *n)
{
    time_t                        now;
    uintptr_t                     m;
    ngx_uint_t                    i;
    ngx_http_upstream_rr_peer_t  *peer;

    now = ngx_time();

    for (peer = sp->rrp.peers->peer, i = 0; peer; peer = peer->next, i++) {

        if (peer->name.len != len
            || ngx_memcmp(peer->name.data, name, len) != 0)
        {
            continue;
        }

        m = (uintptr_t) 1 << i % (8 * sizeof(uintptr_t));

        if ((sp->rrp.tried[i / (8 * sizeof(uintptr_t))] & m)
            || peer->down
            || (peer->max_fails
                && peer->fails >= peer->max_fails
                && now - peer->checked <= peer->fail_timeout)
            || (peer->max_conns && peer->conns >= peer->max_conns))
        {
            return NULL;
        }

        *n = i;
        return peer;
    }

    return NULL;
}


/* its runtime is gone for it: nginx's "no live upstreams", a 503 */

static ngx_int_t
ngx_http_oip_seq_refuse(ngx_peer_connection_t *pc,
    ngx_http_oip_seq_peer_t *sp)
{
    sp->ctx->req.sequence_lost = 1;
    pc->name = sp->rrp.peers->name;

    return NGX_BUSY;
}


/*
 * The peer is done with: a failure (a connect error or timeout, or what
 * proxy_next_upstream counts as one) loses the pin; the answer to a
 * sequence_end unpins it.
 */

static void
ngx_http_oip_seq_free(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_oip_seq_peer_t *sp = data;

    if (sp->key.len && sp->peer_len && !sp->lost) {

        if ((state & NGX_PEER_FAILED) && sp->placed
            && sp->ctx->vars.sequence_start && !sp->r->upstream->request_sent)
        {
            /* a start that never reached its runtime: nothing began
             * there, so the next try places it anew, the failed peer
             * excluded (once sent, it may have begun: lost) */

            ngx_log_error(NGX_LOG_WARN, pc->log, 0,
                          "oip: sequence \"%V\" of model \"%V\": its "
                          "runtime %*s failed before the start: placed "
                          "anew", &sp->key, &sp->ctx->model, sp->peer_len,
                          sp->peer);

            ngx_http_oip_seq_mark(sp, NGX_HTTP_OIP_SEQ_UNPIN, pc->log);
            sp->peer_len = 0;
            sp->placed = 0;

        } else if (state & NGX_PEER_FAILED) {
            ngx_log_error(NGX_LOG_WARN, pc->log, 0,
                          "oip: sequence \"%V\" of model \"%V\": its runtime "
                          "%*s failed: the sequence is lost", &sp->key,
                          &sp->ctx->model, sp->peer_len, sp->peer);

            ngx_http_oip_seq_mark(sp, NGX_HTTP_OIP_SEQ_LOST, pc->log);
            sp->lost = 1;

            /* nginx's 502 for it, when no answer has begun, says so too */
            sp->ctx->req.sequence_lost = 1;

        } else if (sp->ctx->vars.sequence_end) {
            ngx_http_oip_seq_mark(sp, 0, pc->log);
            sp->peer_len = 0;
        }
    }

    ngx_http_upstream_free_round_robin_peer(pc, &sp->rrp, state);
}


/* the sequence's node, if it is there and not idle too long (locked) */

static ngx_http_oip_seq_node_t *
ngx_http_oip_seq_lookup(ngx_http_oip_seq_peer_t *sp,
    ngx_http_oip_seq_zone_t *z)
{
    ngx_http_oip_seq_node_t  *node;

    node = (ngx_http_oip_seq_node_t *) ngx_str_rbtree_lookup(&z->sh->rbtree,
                                                             &sp->key,
                                                             sp->hash);
    if (node == NULL) {
        return NULL;
    }

    if (ngx_current_msec - node->used > sp->conf->idle) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, sp->log, 0,
                       "oip: sequence \"%V\" idle too long: dropped",
                       &sp->key);

        if (node->state == NGX_HTTP_OIP_SEQ_PINNED) {
            ngx_http_oip_seq_count(sp, node, NGX_HTTP_OIP_SEQ_IDLE);
        }

        ngx_http_oip_seq_delete(z, node);
        return NULL;
    }

    return node;
}


/* a node made for the sequence (locked): the idle and lost go first */

static ngx_http_oip_seq_node_t *
ngx_http_oip_seq_pin(ngx_http_oip_seq_zone_t *z, ngx_http_oip_seq_peer_t *sp,
    u_char state, ngx_log_t *log)
{
    size_t                    size;
    ngx_uint_t                i;
    ngx_queue_t              *q;
    ngx_http_oip_seq_node_t  *node, *old;

    size = offsetof(ngx_http_oip_seq_node_t, data) + sp->key.len
           + sp->peer_len;

    for ( ;; ) {
        node = ngx_slab_alloc_locked(z->shpool, size);

        if (node || ngx_queue_empty(&z->sh->lru)) {
            break;
        }

        /* full: an idle or lost one among the least recently used,
         * else the least recently used pin, said so */

        q = ngx_queue_last(&z->sh->lru);
        old = NULL;

        for (i = 0; i < NGX_HTTP_OIP_SEQ_SCAN
                    && q != ngx_queue_sentinel(&z->sh->lru); i++)
        {
            node = ngx_queue_data(q, ngx_http_oip_seq_node_t, lru);

            if (node->state == NGX_HTTP_OIP_SEQ_LOST
                || ngx_current_msec - node->used > sp->conf->idle)
            {
                old = node;
                break;
            }

            q = ngx_queue_prev(q);
        }

        if (old == NULL) {
            old = ngx_queue_data(ngx_queue_last(&z->sh->lru),
                                 ngx_http_oip_seq_node_t, lru);

            ngx_log_error(NGX_LOG_WARN, log, 0,
                          "oip: sequence zone is full: the pin of \"%*s\", "
                          "the least recently used, evicted",
                          old->sn.str.len, old->data);

            ngx_http_oip_seq_count(sp, old, NGX_HTTP_OIP_SEQ_EVICTED);

        } else if (old->state == NGX_HTTP_OIP_SEQ_PINNED) {
            ngx_http_oip_seq_count(sp, old, NGX_HTTP_OIP_SEQ_IDLE);
        }

        ngx_http_oip_seq_delete(z, old);
    }

    if (node == NULL) {
        return NULL;
    }

    node->sn.node.key = sp->hash;
    node->sn.str.data = node->data;
    node->sn.str.len = sp->key.len;
    node->used = ngx_current_msec;
    node->state = state;
    node->peer_len = (u_char) sp->peer_len;

    ngx_memcpy(node->data, sp->key.data, sp->key.len);
    ngx_memcpy(node->data + sp->key.len, sp->peer, sp->peer_len);

    ngx_rbtree_insert(&z->sh->rbtree, &node->sn.node);
    ngx_queue_insert_head(&z->sh->lru, &node->lru);

    return node;
}


static void
ngx_http_oip_seq_delete(ngx_http_oip_seq_zone_t *z,
    ngx_http_oip_seq_node_t *node)
{
    ngx_queue_remove(&node->lru);
    ngx_rbtree_delete(&z->sh->rbtree, &node->sn.node);
    ngx_slab_free_locked(z->shpool, node);
}


/* the request's sequence lost (its tombstone, until idle), ended, or
 * unpinned (NGX_HTTP_OIP_SEQ_UNPIN: a start that reached nothing) */

static void
ngx_http_oip_seq_mark(ngx_http_oip_seq_peer_t *sp, u_char state,
    ngx_log_t *log)
{
    ngx_http_oip_seq_node_t  *node;
    ngx_http_oip_seq_zone_t  *z;

    z = sp->conf->zone->data;

    ngx_shmtx_lock(&z->shpool->mutex);

    node = ngx_http_oip_seq_lookup(sp, z);

    if (node && state == NGX_HTTP_OIP_SEQ_LOST) {
        if (node->state == NGX_HTTP_OIP_SEQ_PINNED) {
            ngx_http_oip_seq_count(sp, node, NGX_HTTP_OIP_SEQ_GONE);
        }

        node->state = state;
        node->used = ngx_current_msec;

    } else if (node) {
        if (state != NGX_HTTP_OIP_SEQ_UNPIN) {
            ngx_http_oip_seq_count(sp, node, NGX_HTTP_OIP_SEQ_ENDED);
        }

        ngx_http_oip_seq_delete(z, node);

    } else if (state == NGX_HTTP_OIP_SEQ_LOST) {
        node = ngx_http_oip_seq_pin(z, sp, state, log);

        if (node) {
            ngx_http_oip_seq_count(sp, node, NGX_HTTP_OIP_SEQ_GONE);
        }
    }

    ngx_shmtx_unlock(&z->shpool->mutex);
}


/* a pin's end, under the node's model (the key up to its NUL) */

static void
ngx_http_oip_seq_count(ngx_http_oip_seq_peer_t *sp,
    ngx_http_oip_seq_node_t *node, ngx_uint_t end)
{
    u_char  *nul;

    nul = ngx_strlchr(node->data, node->data + node->sn.str.len, '\0');

    ngx_http_oip_metrics_sequence(sp->r, node->data,
                                  nul ? (size_t) (nul - node->data) : 0,
                                  end);
}


/*
 * For the metrics' gauge: the sequences pinned now, per model, summed
 * over the zone (lost and idle ones not counted).  found() gives a
 * model's index of sums (or none: -1).
 */

void
ngx_http_oip_sequence_sum(ngx_shm_zone_t *shm_zone,
    ngx_int_t (*found)(void *data, u_char *model, size_t len), void *data,
    uint64_t *active)
{
    u_char                   *nul;
    ngx_int_t                 i;
    ngx_queue_t              *q;
    ngx_http_oip_seq_node_t  *node;
    ngx_http_oip_seq_zone_t  *z;

    z = shm_zone->data;

    ngx_shmtx_lock(&z->shpool->mutex);

    for (q = ngx_queue_head(&z->sh->lru);
         q != ngx_queue_sentinel(&z->sh->lru);
         q = ngx_queue_next(q))
    {
        node = ngx_queue_data(q, ngx_http_oip_seq_node_t, lru);

        if (node->state != NGX_HTTP_OIP_SEQ_PINNED
            || ngx_current_msec - node->used > z->idle)
        {
            continue;
        }

        nul = ngx_strlchr(node->data, node->data + node->sn.str.len, '\0');

        if (nul == NULL) {
            continue;
        }

        i = found(data, node->data, nul - node->data);

        if (i >= 0) {
            active[i]++;
        }
    }

    ngx_shmtx_unlock(&z->shpool->mutex);
}


/*
 * The runtime does not know the request's sequence (the response path
 * read its words): lost, as a failed peer loses it.  NGX_DECLINED: the
 * request was not balanced by oip_sequence.
 */

ngx_int_t
ngx_http_oip_sequence_lose(ngx_http_request_t *r)
{
    ngx_http_oip_ctx_t       *ctx;
    ngx_http_oip_seq_peer_t  *sp;

    ctx = ngx_http_oip_get_ctx(r);

    if (ctx == NULL || ctx->req.sequence == NULL) {
        return NGX_DECLINED;
    }

    sp = ctx->req.sequence;

    ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                  "oip: sequence \"%V\" of model \"%V\": its runtime %*s "
                  "does not know it: the sequence is lost", &sp->key,
                  &sp->ctx->model, sp->peer_len, sp->peer);

    ngx_http_oip_seq_mark(sp, NGX_HTTP_OIP_SEQ_LOST, r->connection->log);
    sp->lost = 1;

    return NGX_OK;
}


/* the message of the 503 a lost sequence gets, NUL-terminated */

u_char *
ngx_http_oip_sequence_lost(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx)
{
    u_char     *p, *last;
    ngx_str_t   id;
    u_char      digits[NGX_INT64_LEN];

    if (ctx->vars.sequence_str.len) {
        id = ctx->vars.sequence_str;

    } else {
        id.data = digits;
        id.len = ngx_sprintf(digits, "%uL", ctx->vars.sequence_id) - digits;
    }

    if (id.len > 256) {
        id.len = 256;
    }

    p = ngx_pnalloc(r->pool, id.len + ctx->model.len + 128);
    if (p == NULL) {
        return NULL;
    }

    last = ngx_sprintf(p, "sequence %V of model %V: its runtime is "
                       "unavailable; start a new sequence", &id,
                       &ctx->model);
    *last = '\0';

    return p;
}


/*
 * The runtime's START-flag 400 to a sequence's request that does not
 * start it: the sequence is lost, and the answer is the documented 503,
 * its words in error (OIP_ERROR_LEN).  NGX_DECLINED: not a sequence's.
 */

ngx_int_t
ngx_http_oip_sequence_gone(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    char *error)
{
    u_char  *msg;

    if (!ctx->vars.has_sequence || ctx->vars.sequence_start
        || ngx_http_oip_sequence_lose(r) != NGX_OK)
    {
        return NGX_DECLINED;
    }

    msg = ngx_http_oip_sequence_lost(r, ctx);
    if (msg == NULL) {
        return NGX_ERROR;
    }

    ngx_cpystrn((u_char *) error, msg, OIP_ERROR_LEN);

    r->headers_out.status = NGX_HTTP_SERVICE_UNAVAILABLE;
    ngx_str_null(&r->headers_out.status_line);

    return NGX_OK;
}
