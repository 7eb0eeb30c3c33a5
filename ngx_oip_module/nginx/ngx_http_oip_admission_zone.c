
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The admission zone (oip_admission_zone): per key, the requests and
 * tensor bytes in flight from every worker and the queue of those that
 * wait, in shared memory under the slab's mutex (limit_req's layout: a
 * red-black tree by the key's hash, an LRU of idle keys to evict).
 *
 * A share is a record in the zone, owned by a process (pid and start
 * time): taken, or granted to a waiter by a release, under the mutex, so
 * that no race admits twice.  The request path (ngx_http_oip_admission.c)
 * holds its record and gives it back once.  A worker killed with SIGKILL
 * gives nothing back: the survivors reclaim what dead processes owned.
 */


#include "ngx_http_oip_module.h"


#define NGX_HTTP_OIP_ADM_WORKERS  64

#define NGX_HTTP_OIP_SHARE_WAITING  1
#define NGX_HTTP_OIP_SHARE_HELD     2
#define NGX_HTTP_OIP_SHARE_SHED     3   /* out of the queue: a waiter of
                                           a higher level took its place */

/* how often a key's owners are checked when a request would wait */
#define NGX_HTTP_OIP_ADM_CHECK    1000000


typedef struct {
    ngx_str_node_t             sn;          /* nginx's string tree: the
                                               key's crc32, and the key */
    ngx_queue_t                idle;        /* in the idle LRU, when idle */
    ngx_queue_t                held;        /* of shares */
    ngx_queue_t                waiting;     /* of shares: by level, then
                                               arrival */
    ngx_queue_t                shed;        /* of shares, until their
                                               owners have seen it */
    ngx_uint_t                 nheld;
    uint64_t                   held_bytes;
    ngx_uint_t                 nwaiting;
    uint64_t                   waiting_bytes;
    uint64_t                   last_release;  /* usec */
    uint64_t                   drain;         /* usec between releases */
    uint64_t                   checked;       /* usec: owners checked */
    u_char                     key[1];
} ngx_http_oip_adm_node_t;


struct ngx_http_oip_share_s {
    ngx_queue_t                queue;       /* in its key's held/waiting */
    ngx_http_oip_adm_node_t   *node;
    ngx_pid_t                  pid;         /* the owner: pid, and ... */
    uint64_t                   gen;         /* ... its start, in usec */
    uint64_t                   bytes;
    ngx_uint_t                 level;       /* 1 the highest */
    ngx_uint_t                 concurrency; /* its location's budget */
    uint64_t                   budget;
    uint64_t                   granted;     /* usec: the release's time */
    volatile ngx_uint_t        state;       /* NGX_HTTP_OIP_SHARE_* */
    u_short                    model_len;
    u_char                     model[1];
};


typedef struct {
    ngx_pid_t                  pid;
    uint64_t                   gen;
} ngx_http_oip_adm_worker_t;


typedef struct {
    ngx_rbtree_t               rbtree;
    ngx_rbtree_node_t          sentinel;
    ngx_queue_t                idle;
    ngx_http_oip_adm_worker_t  workers[NGX_HTTP_OIP_ADM_WORKERS];
} ngx_http_oip_adm_sh_t;


typedef struct {
    ngx_http_oip_adm_sh_t     *sh;
    ngx_slab_pool_t           *shpool;
} ngx_http_oip_adm_zone_t;


static ngx_int_t ngx_http_oip_adm_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_http_oip_adm_node_t *ngx_http_oip_adm_node(
    ngx_http_oip_adm_zone_t *z, ngx_str_t *key, ngx_log_t *log);
static void *ngx_http_oip_adm_alloc(ngx_http_oip_adm_zone_t *z, size_t size);
static ngx_uint_t ngx_http_oip_adm_fits(ngx_http_oip_adm_node_t *node,
    ngx_http_oip_admit_t *c, ngx_http_oip_adm_ask_t *a);
static ngx_uint_t ngx_http_oip_adm_room(ngx_http_oip_adm_node_t *node,
    ngx_http_oip_adm_ask_t *a);
static void ngx_http_oip_adm_queue(ngx_http_oip_adm_node_t *node,
    ngx_http_oip_share_t *s);
static ngx_uint_t ngx_http_oip_adm_idle(ngx_http_oip_adm_node_t *node);
static void ngx_http_oip_adm_busy(ngx_http_oip_adm_zone_t *z,
    ngx_http_oip_adm_node_t *node);
static ngx_uint_t ngx_http_oip_adm_free(ngx_http_oip_adm_zone_t *z,
    ngx_http_oip_share_t *s, uint64_t now);
static ngx_uint_t ngx_http_oip_adm_grant(ngx_http_oip_adm_node_t *node,
    uint64_t now);
static ngx_uint_t ngx_http_oip_adm_reclaim(ngx_http_oip_adm_zone_t *z,
    ngx_http_oip_adm_node_t *node, ngx_log_t *log);
static ngx_uint_t ngx_http_oip_adm_alive(ngx_http_oip_adm_zone_t *z,
    ngx_http_oip_share_t *s);
static ngx_uint_t ngx_http_oip_adm_retry(ngx_http_oip_adm_node_t *node);


/* this process, as the zone knows it: its pid and when it started */
static uint64_t  ngx_http_oip_adm_gen;

/* the zones' tag: a name given to another of the module's zones is
 * refused by nginx rather than read as this kind */
static ngx_uint_t  ngx_http_oip_adm_tag;


/* oip_admission_zone zone=NAME:SIZE */

char *
ngx_http_oip_admission_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_oip_main_conf_t *omcf = conf;

    char                      *rv;
    ssize_t                    size;
    ngx_str_t                 *value, name;
    ngx_shm_zone_t            *shm_zone, **zp;
    ngx_http_oip_adm_zone_t   *z;

    value = cf->args->elts;

    if (cf->args->nelts != 2 || ngx_strncmp(value[1].data, "zone=", 5) != 0) {
        return "takes zone=NAME:SIZE";
    }

    rv = ngx_http_oip_zone_arg(cf, &value[1], &name, &size);
    if (rv != NGX_CONF_OK) {
        return rv;
    }

    /* its header and a few keys: smaller, it would be full at once */

    if (size < (ssize_t) (8 * ngx_pagesize)) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is too small: it needs %uzk at least",
                           &name, 8 * ngx_pagesize / 1024);
        return NGX_CONF_ERROR;
    }

    shm_zone = ngx_shared_memory_add(cf, &name, size, &ngx_http_oip_adm_tag);
    if (shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    if (shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is already declared", &name);
        return NGX_CONF_ERROR;
    }

    z = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_adm_zone_t));
    if (z == NULL) {
        return NGX_CONF_ERROR;
    }

    shm_zone->init = ngx_http_oip_adm_init_zone;
    shm_zone->data = z;

    if (omcf->admission == NULL) {
        omcf->admission = ngx_array_create(cf->pool, 2,
                                           sizeof(ngx_shm_zone_t *));
        if (omcf->admission == NULL) {
            return NGX_CONF_ERROR;
        }
    }

    zp = ngx_array_push(omcf->admission);
    if (zp == NULL) {
        return NGX_CONF_ERROR;
    }

    *zp = shm_zone;

    return NGX_CONF_OK;
}


/* the zone oip_admit names: declared by oip_admission_zone, before or
 * after (nginx refuses one never declared: "zero size shared memory") */

ngx_shm_zone_t *
ngx_http_oip_admission_zone_ref(ngx_conf_t *cf, ngx_str_t *name)
{
    return ngx_shared_memory_add(cf, name, 0, &ngx_http_oip_adm_tag);
}


/* a reload with the same name and size keeps the zone and every share */

static ngx_int_t
ngx_http_oip_adm_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_int_t                 rc;
    ngx_http_oip_adm_zone_t  *z;

    rc = ngx_http_oip_zone_header(shm_zone, data,
                                  sizeof(ngx_http_oip_adm_sh_t));
    if (rc != NGX_DONE) {
        return rc;
    }

    z = shm_zone->data;

    ngx_rbtree_init(&z->sh->rbtree, &z->sh->sentinel,
                    ngx_str_rbtree_insert_value);
    ngx_queue_init(&z->sh->idle);

    z->shpool->log_nomem = 0;

    return NGX_OK;
}


/*
 * A worker starts: it registers itself (a pid reused by a later process
 * of ours then says that its former owner is dead) and reclaims what
 * dead processes left, a worker killed with SIGKILL among them: the
 * master starts its successor once it has found it dead.
 */

void
ngx_http_oip_admission_start(ngx_cycle_t *cycle, ngx_array_t *zones)
{
    ngx_uint_t                  i, k, freed;
    ngx_queue_t                 q;
    ngx_shm_zone_t            **zp;
    ngx_rbtree_node_t          *n;
    ngx_http_oip_adm_sh_t      *sh;
    ngx_http_oip_adm_zone_t    *z;
    ngx_http_oip_adm_worker_t  *w, *slot;

    ngx_http_oip_adm_gen = ngx_http_oip_usec();

    if (zones == NULL) {
        return;
    }

    zp = zones->elts;

    for (i = 0; i < zones->nelts; i++) {
        z = zp[i]->data;
        sh = z->sh;

        ngx_shmtx_lock(&z->shpool->mutex);

        slot = NULL;

        for (k = 0; k < NGX_HTTP_OIP_ADM_WORKERS; k++) {
            w = &sh->workers[k];

            if (w->pid == ngx_pid) {
                slot = w;
                break;
            }

            if (slot == NULL
                && (w->pid == 0
                    || (kill(w->pid, 0) == -1 && ngx_errno == NGX_ESRCH)))
            {
                slot = w;
            }
        }

        if (slot) {
            slot->pid = ngx_pid;
            slot->gen = ngx_http_oip_adm_gen;
        }

        /* every key: those with nothing in flight hold nothing to free */

        ngx_queue_init(&q);
        freed = 0;

        if (sh->rbtree.root != sh->rbtree.sentinel) {
            for (n = ngx_rbtree_min(sh->rbtree.root, sh->rbtree.sentinel);
                 n;
                 n = ngx_rbtree_next(&sh->rbtree, n))
            {
                freed += ngx_http_oip_adm_reclaim(z,
                                          (ngx_http_oip_adm_node_t *) n,
                                          cycle->log);
            }
        }

        ngx_shmtx_unlock(&z->shpool->mutex);

        if (freed) {
            ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                          "oip: admission zone \"%V\": %ui shares of "
                          "processes gone reclaimed", &zp[i]->shm.name,
                          freed);
        }
    }
}


/*
 * A request asks for its share: NGX_OK (held: *share), NGX_AGAIN (it
 * waits: *share, its place in the queue), NGX_BUSY (the queue is full:
 * a->waiting, a->retry), NGX_DECLINED (the zone is full of keys).
 */

ngx_int_t
ngx_http_oip_admission_take(ngx_shm_zone_t *shm_zone,
    ngx_http_oip_adm_ask_t *a, ngx_http_oip_share_t **share)
{
    size_t                    size, mlen;
    uint64_t                  now;
    ngx_http_oip_admit_t     *c;
    ngx_http_oip_share_t     *s;
    ngx_http_oip_adm_node_t  *node;
    ngx_http_oip_adm_zone_t  *z;

    z = shm_zone->data;
    c = a->conf;
    now = ngx_http_oip_usec();

    /* a model name past what a metrics label takes is counted unnamed */
    mlen = (a->model.len <= 128) ? a->model.len : 0;
    size = offsetof(ngx_http_oip_share_t, model) + mlen;

    ngx_shmtx_lock(&z->shpool->mutex);

    node = ngx_http_oip_adm_node(z, &a->key, a->log);

    if (node == NULL) {
        ngx_shmtx_unlock(&z->shpool->mutex);
        return NGX_DECLINED;
    }

    a->waiting = node->nwaiting;
    a->held = node->nheld;

    /* nobody overtakes a waiter of its level or a higher one */

    if (ngx_http_oip_adm_fits(node, c, a)) {
        goto take;
    }

    /* full: owners that died may hold it (checked now and then) */

    if (node->nheld && now - node->checked >= NGX_HTTP_OIP_ADM_CHECK) {
        node->checked = now;

        if (ngx_http_oip_adm_reclaim(z, node, a->log)
            && ngx_http_oip_adm_fits(node, c, a))
        {
            goto take;
        }
    }

    /* a full queue: the lowest, latest waiters may give their place */

    if (!ngx_http_oip_adm_room(node, a)) {
        a->retry = ngx_http_oip_adm_retry(node);

        ngx_shmtx_unlock(&z->shpool->mutex);
        return NGX_BUSY;
    }

take:

    /* out of the idle list first: making room must not evict it */

    ngx_http_oip_adm_busy(z, node);

    s = ngx_http_oip_adm_alloc(z, size);

    if (s == NULL) {
        if (ngx_http_oip_adm_idle(node)) {
            ngx_queue_insert_head(&z->sh->idle, &node->idle);
        }

        ngx_log_error(NGX_LOG_ERR, a->log, 0,
                      "oip: admission zone is full: no room for a share "
                      "of key \"%V\"", &a->key);

        ngx_shmtx_unlock(&z->shpool->mutex);
        return NGX_DECLINED;
    }

    s->node = node;
    s->pid = ngx_pid;
    s->gen = ngx_http_oip_adm_gen;
    s->bytes = a->bytes;
    s->level = a->level;
    s->concurrency = c->concurrency;
    s->budget = c->bytes;
    s->granted = 0;
    s->model_len = (u_short) mlen;
    ngx_memcpy(s->model, a->model.data, mlen);

    if (ngx_http_oip_adm_fits(node, c, a)) {
        s->state = NGX_HTTP_OIP_SHARE_HELD;
        ngx_queue_insert_tail(&node->held, &s->queue);
        node->nheld++;
        node->held_bytes += a->bytes;

        ngx_shmtx_unlock(&z->shpool->mutex);

        *share = s;
        return NGX_OK;
    }

    s->state = NGX_HTTP_OIP_SHARE_WAITING;
    ngx_http_oip_adm_queue(node, s);

    ngx_shmtx_unlock(&z->shpool->mutex);

    *share = s;
    return NGX_AGAIN;
}


/* without the lock: a waiter's state is written under it, once */

ngx_uint_t
ngx_http_oip_admission_shed(ngx_http_oip_share_t *s)
{
    return s->state == NGX_HTTP_OIP_SHARE_SHED;
}


ngx_uint_t
ngx_http_oip_admission_granted(ngx_http_oip_share_t *s, uint64_t *granted)
{
    if (s->state != NGX_HTTP_OIP_SHARE_HELD) {
        return 0;
    }

    ngx_memory_barrier();

    *granted = s->granted;

    return 1;
}


/*
 * A waiter leaves the queue (its wait ran out, its client left):
 * NGX_OK, NGX_DONE when a release granted it meanwhile (it then holds
 * its share), or NGX_DECLINED when it had been shed (out of the queue
 * already).  *retry: Retry-After for a 429.  *grants: waiters behind it
 * that fit now.
 */

ngx_int_t
ngx_http_oip_admission_leave(ngx_shm_zone_t *shm_zone,
    ngx_http_oip_share_t *s, ngx_uint_t *retry, ngx_uint_t *grants)
{
    uint64_t                  now;
    ngx_http_oip_adm_zone_t  *z;

    z = shm_zone->data;
    now = ngx_http_oip_usec();
    *grants = 0;

    ngx_shmtx_lock(&z->shpool->mutex);

    if (s->state == NGX_HTTP_OIP_SHARE_HELD) {
        ngx_shmtx_unlock(&z->shpool->mutex);
        return NGX_DONE;
    }

    *retry = ngx_http_oip_adm_retry(s->node);

    if (s->state == NGX_HTTP_OIP_SHARE_SHED) {
        (void) ngx_http_oip_adm_free(z, s, now);
        ngx_shmtx_unlock(&z->shpool->mutex);
        return NGX_DECLINED;
    }

    *grants = ngx_http_oip_adm_free(z, s, now);

    ngx_shmtx_unlock(&z->shpool->mutex);

    return NGX_OK;
}


/* a share given back, once: the waiters that fit now are granted it */

ngx_uint_t
ngx_http_oip_admission_release(ngx_shm_zone_t *shm_zone,
    ngx_http_oip_share_t *s)
{
    uint64_t                  now;
    ngx_uint_t                grants;
    ngx_http_oip_adm_zone_t  *z;

    z = shm_zone->data;
    now = ngx_http_oip_usec();

    ngx_shmtx_lock(&z->shpool->mutex);
    grants = ngx_http_oip_adm_free(z, s, now);
    ngx_shmtx_unlock(&z->shpool->mutex);

    return grants;
}


/*
 * For the metrics' gauges: what each model holds, and how many of its
 * requests wait, summed over the keys.  found() gives a model's index
 * of sums (or none: -1).
 */

void
ngx_http_oip_admission_sum(ngx_shm_zone_t *shm_zone,
    ngx_int_t (*found)(void *data, u_char *model, size_t len), void *data,
    uint64_t *requests, uint64_t *bytes, uint64_t *waiting)
{
    ngx_int_t                 i;
    ngx_queue_t              *q;
    ngx_rbtree_node_t        *n;
    ngx_http_oip_share_t     *s;
    ngx_http_oip_adm_sh_t    *sh;
    ngx_http_oip_adm_node_t  *node;
    ngx_http_oip_adm_zone_t  *z;

    z = shm_zone->data;
    sh = z->sh;

    ngx_shmtx_lock(&z->shpool->mutex);

    if (sh->rbtree.root != sh->rbtree.sentinel) {
        for (n = ngx_rbtree_min(sh->rbtree.root, sh->rbtree.sentinel);
             n;
             n = ngx_rbtree_next(&sh->rbtree, n))
        {
            node = (ngx_http_oip_adm_node_t *) n;

            for (q = ngx_queue_head(&node->held);
                 q != ngx_queue_sentinel(&node->held);
                 q = ngx_queue_next(q))
            {
                s = ngx_queue_data(q, ngx_http_oip_share_t, queue);
                i = found(data, s->model, s->model_len);

                if (i >= 0) {
                    requests[i]++;
                    bytes[i] += s->bytes;
                }
            }

            for (q = ngx_queue_head(&node->waiting);
                 q != ngx_queue_sentinel(&node->waiting);
                 q = ngx_queue_next(q))
            {
                s = ngx_queue_data(q, ngx_http_oip_share_t, queue);
                i = found(data, s->model, s->model_len);

                if (i >= 0) {
                    waiting[i]++;
                }
            }
        }
    }

    ngx_shmtx_unlock(&z->shpool->mutex);
}


/* the key's node, made if new (locked) */

static ngx_http_oip_adm_node_t *
ngx_http_oip_adm_node(ngx_http_oip_adm_zone_t *z, ngx_str_t *key,
    ngx_log_t *log)
{
    size_t                    size;
    uint32_t                  hash;
    ngx_http_oip_adm_node_t  *node;

    /* the key's text lives in the node, in the zone: the same address
     * in every worker, as the tree's own pointers */

    hash = ngx_crc32_short(key->data, key->len);

    node = (ngx_http_oip_adm_node_t *) ngx_str_rbtree_lookup(
                                               &z->sh->rbtree, key, hash);
    if (node) {
        return node;
    }

    size = offsetof(ngx_http_oip_adm_node_t, key) + key->len;

    node = ngx_http_oip_adm_alloc(z, size);

    if (node == NULL) {
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "oip: admission zone is full: no room for key \"%V\"",
                      key);
        return NULL;
    }

    ngx_memzero(node, size);

    node->sn.node.key = hash;
    node->sn.str.data = node->key;
    node->sn.str.len = key->len;
    ngx_memcpy(node->key, key->data, key->len);

    ngx_queue_init(&node->held);
    ngx_queue_init(&node->waiting);
    ngx_queue_init(&node->shed);

    ngx_rbtree_insert(&z->sh->rbtree, &node->sn.node);

    /* idle until it holds something: the first to go if nothing fits */
    ngx_queue_insert_head(&z->sh->idle, &node->idle);

    return node;
}


/* memory from the slab, idle keys evicted, the oldest first, to make it */

static void *
ngx_http_oip_adm_alloc(ngx_http_oip_adm_zone_t *z, size_t size)
{
    void                     *p;
    ngx_queue_t              *q;
    ngx_http_oip_adm_node_t  *node;

    for ( ;; ) {
        p = ngx_slab_alloc_locked(z->shpool, size);

        if (p || ngx_queue_empty(&z->sh->idle)) {
            return p;
        }

        q = ngx_queue_last(&z->sh->idle);
        node = ngx_queue_data(q, ngx_http_oip_adm_node_t, idle);

        ngx_queue_remove(q);
        ngx_rbtree_delete(&z->sh->rbtree, &node->sn.node);
        ngx_slab_free_locked(z->shpool, node);
    }
}


/*
 * Admitted now: nobody of its level or a higher one waits (the head of
 * the queue is the highest), and its request and bytes fit.
 */

static ngx_uint_t
ngx_http_oip_adm_fits(ngx_http_oip_adm_node_t *node, ngx_http_oip_admit_t *c,
    ngx_http_oip_adm_ask_t *a)
{
    ngx_http_oip_share_t  *head;

    if (node->nwaiting) {
        head = ngx_queue_data(ngx_queue_head(&node->waiting),
                              ngx_http_oip_share_t, queue);

        if (head->level <= a->level) {
            return 0;
        }
    }

    return (c->concurrency == 0 || node->nheld < c->concurrency)
           && (c->bytes == 0 || node->held_bytes + a->bytes <= c->bytes);
}


/*
 * Room in the queue for a waiter, made if waiters of a lower level can
 * give theirs, the lowest and latest first (a->shed: how many did): it
 * is found from the tail, and taken only when enough would be given.
 */

static ngx_uint_t
ngx_http_oip_adm_room(ngx_http_oip_adm_node_t *node,
    ngx_http_oip_adm_ask_t *a)
{
    uint64_t               bytes;
    ngx_uint_t             n, shed;
    ngx_queue_t           *q, *prev;
    ngx_http_oip_share_t  *s;
    ngx_http_oip_admit_t  *c;

    c = a->conf;
    n = node->nwaiting;
    bytes = node->waiting_bytes;
    shed = 0;

    for (q = ngx_queue_last(&node->waiting);
         (n >= c->queue || bytes + a->bytes > c->queue_bytes)
         && q != ngx_queue_sentinel(&node->waiting);
         q = ngx_queue_prev(q))
    {
        s = ngx_queue_data(q, ngx_http_oip_share_t, queue);

        if (s->level <= a->level) {
            break;
        }

        n--;
        bytes -= s->bytes;
        shed++;
    }

    if (n >= c->queue || bytes + a->bytes > c->queue_bytes) {
        return 0;
    }

    a->shed = shed;

    for (q = ngx_queue_last(&node->waiting); shed; shed--, q = prev) {
        prev = ngx_queue_prev(q);
        s = ngx_queue_data(q, ngx_http_oip_share_t, queue);

        ngx_log_debug2(NGX_LOG_DEBUG_HTTP, a->log, 0,
                       "oip: admission: a waiter of level %ui shed for one "
                       "of level %ui", s->level, a->level);

        ngx_queue_remove(q);
        node->nwaiting--;
        node->waiting_bytes -= s->bytes;

        ngx_queue_insert_tail(&node->shed, q);

        ngx_memory_barrier();
        s->state = NGX_HTTP_OIP_SHARE_SHED;
    }

    return 1;
}


/* a waiter in its place: behind every waiter of its level or higher */

static void
ngx_http_oip_adm_queue(ngx_http_oip_adm_node_t *node, ngx_http_oip_share_t *s)
{
    ngx_queue_t           *q;
    ngx_http_oip_share_t  *w;

    for (q = ngx_queue_last(&node->waiting);
         q != ngx_queue_sentinel(&node->waiting);
         q = ngx_queue_prev(q))
    {
        w = ngx_queue_data(q, ngx_http_oip_share_t, queue);

        if (w->level <= s->level) {
            break;
        }
    }

    /* after q: the sentinel's next is the head */
    ngx_queue_insert_after(q, &s->queue);

    node->nwaiting++;
    node->waiting_bytes += s->bytes;
}


/* a key holds nothing: no share, no waiter, no shed record */

static ngx_uint_t
ngx_http_oip_adm_idle(ngx_http_oip_adm_node_t *node)
{
    return node->nheld == 0 && node->nwaiting == 0
           && ngx_queue_empty(&node->shed);
}


/* a key is in the idle list exactly while it holds nothing */

static void
ngx_http_oip_adm_busy(ngx_http_oip_adm_zone_t *z,
    ngx_http_oip_adm_node_t *node)
{
    if (ngx_http_oip_adm_idle(node)) {
        ngx_queue_remove(&node->idle);
    }
}


/* a share or a waiter freed (locked): what fits now is granted */

static ngx_uint_t
ngx_http_oip_adm_free(ngx_http_oip_adm_zone_t *z, ngx_http_oip_share_t *s,
    uint64_t now)
{
    ngx_uint_t                grants;
    ngx_http_oip_adm_node_t  *node;

    node = s->node;

    ngx_queue_remove(&s->queue);

    if (s->state == NGX_HTTP_OIP_SHARE_HELD) {
        node->nheld--;
        node->held_bytes -= s->bytes;

        /* the drain rate, while requests wait: for Retry-After */

        if (node->nwaiting && node->last_release) {
            node->drain = node->drain
                          ? (node->drain * 7 + (now - node->last_release)) / 8
                          : now - node->last_release;
        }

        node->last_release = now;

    } else if (s->state == NGX_HTTP_OIP_SHARE_WAITING) {
        node->nwaiting--;
        node->waiting_bytes -= s->bytes;
    }

    ngx_slab_free_locked(z->shpool, s);

    grants = ngx_http_oip_adm_grant(node, now);

    if (ngx_http_oip_adm_idle(node)) {
        ngx_queue_insert_head(&z->sh->idle, &node->idle);
    }

    return grants;
}


/* the head of the queue, while it fits its budget, takes its share */

static ngx_uint_t
ngx_http_oip_adm_grant(ngx_http_oip_adm_node_t *node, uint64_t now)
{
    ngx_uint_t             n;
    ngx_queue_t           *q;
    ngx_http_oip_share_t  *s;

    n = 0;

    while (!ngx_queue_empty(&node->waiting)) {
        q = ngx_queue_head(&node->waiting);
        s = ngx_queue_data(q, ngx_http_oip_share_t, queue);

        if ((s->concurrency && node->nheld >= s->concurrency)
            || (s->budget && node->held_bytes + s->bytes > s->budget))
        {
            break;
        }

        ngx_queue_remove(q);
        node->nwaiting--;
        node->waiting_bytes -= s->bytes;

        ngx_queue_insert_tail(&node->held, q);
        node->nheld++;
        node->held_bytes += s->bytes;

        s->granted = now;
        ngx_memory_barrier();
        s->state = NGX_HTTP_OIP_SHARE_HELD;

        n++;
    }

    return n;
}


/*
 * What processes that are gone held or waited for is freed (locked).
 * Until then the runtime may still be running their requests: for
 * that window it can hold up to twice a key's budget.
 */

static ngx_uint_t
ngx_http_oip_adm_reclaim(ngx_http_oip_adm_zone_t *z,
    ngx_http_oip_adm_node_t *node, ngx_log_t *log)
{
    ngx_uint_t             n, k;
    ngx_queue_t           *q, *next, *list[3];
    ngx_http_oip_share_t  *s;

    n = 0;
    list[0] = &node->held;
    list[1] = &node->waiting;
    list[2] = &node->shed;

    for (k = 0; k < 3; k++) {
        for (q = ngx_queue_head(list[k]);
             q != ngx_queue_sentinel(list[k]);
             q = next)
        {
            next = ngx_queue_next(q);
            s = ngx_queue_data(q, ngx_http_oip_share_t, queue);

            if (ngx_http_oip_adm_alive(z, s)) {
                continue;
            }

            ngx_log_error(NGX_LOG_WARN, log, 0,
                          "oip: admission key \"%*s\": the share of "
                          "process %P, gone, reclaimed", node->sn.str.len,
                          node->key, s->pid);

            /* what it frees may grant the rest: walk on from the head */

            (void) ngx_http_oip_adm_free(z, s, ngx_http_oip_usec());
            next = ngx_queue_head(list[k]);
            n++;
        }
    }

    return n;
}


static ngx_uint_t
ngx_http_oip_adm_alive(ngx_http_oip_adm_zone_t *z, ngx_http_oip_share_t *s)
{
    ngx_uint_t                  k;
    ngx_http_oip_adm_worker_t  *w;

    if (s->pid == ngx_pid) {
        return s->gen == ngx_http_oip_adm_gen;
    }

    /* its pid taken by a later process of ours: the owner is gone */

    for (k = 0; k < NGX_HTTP_OIP_ADM_WORKERS; k++) {
        w = &z->sh->workers[k];

        if (w->pid == s->pid) {
            if (w->gen != s->gen) {
                return 0;
            }

            break;
        }
    }

    /* EPERM: some process is there, not ours to judge */

    return !(kill(s->pid, 0) == -1 && ngx_errno == NGX_ESRCH);
}


/* Retry-After: the queue ahead at the drain rate seen, at least 1 s */

static ngx_uint_t
ngx_http_oip_adm_retry(ngx_http_oip_adm_node_t *node)
{
    uint64_t  usec;

    if (node->drain == 0) {
        return 1;
    }

    usec = (node->nwaiting + 1) * node->drain;

    if (usec >= 3600 * (uint64_t) 1000000) {
        return 3600;
    }

    return (ngx_uint_t) ((usec + 999999) / 1000000);
}
