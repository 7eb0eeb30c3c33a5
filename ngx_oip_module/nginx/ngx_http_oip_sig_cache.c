
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The models' signatures in shared memory, for every worker
 * (oip_signature_zone): an rbtree by key and an LRU queue, limit_req's
 * way, kept across reloads.  An entry is a signature, or "not found"
 * (kept for invalid=); a signature older than valid= is still given,
 * and one request is told to refresh it.  How a signature is fetched is
 * ngx_http_oip_signature.c's: it calls only the functions below.
 */


#include "ngx_http_oip_module.h"


/* a key refetched after a misfit, or refreshed, at most this often */
#define NGX_HTTP_OIP_SIG_AGAIN     1000


typedef struct {
    ngx_rbtree_node_t          node;      /* key: crc32 of key */
    ngx_queue_t                queue;     /* LRU, the newest first */
    ngx_msec_t                 fetched;
    ngx_msec_t                 refresh;   /* a refresh began, or 0 */
    ngx_msec_t                 refetch;   /* the last refetch for a misfit */
    u_char                    *sig;       /* NULL: the model is not found */
    uint32_t                   sig_len;
    u_short                    len;
    u_char                     key[1];
} ngx_http_oip_sig_node_t;


typedef struct {
    ngx_rbtree_t               rbtree;
    ngx_rbtree_node_t          sentinel;
    ngx_queue_t                queue;
} ngx_http_oip_sig_shctx_t;


typedef struct {
    ngx_http_oip_sig_shctx_t  *sh;
    ngx_slab_pool_t           *shpool;
    ngx_msec_t                 valid;
    ngx_msec_t                 invalid;
} ngx_http_oip_sig_zone_t;


static ngx_int_t ngx_http_oip_sig_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static void ngx_http_oip_sig_insert(ngx_rbtree_node_t *temp,
    ngx_rbtree_node_t *node, ngx_rbtree_node_t *sentinel);
static ngx_http_oip_sig_node_t *ngx_http_oip_sig_find(
    ngx_http_oip_sig_zone_t *z, ngx_str_t *key, uint32_t hash);
static void *ngx_http_oip_sig_alloc(ngx_http_oip_sig_zone_t *z, size_t size,
    ngx_http_oip_sig_node_t *keep);


/* oip_signature_zone zone=NAME:SIZE [valid=TIME] [invalid=TIME] */

char *
ngx_http_oip_signature_zone(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    char                     *rv;
    u_char                   *p;
    ssize_t                   size;
    ngx_str_t                *value, name, s;
    ngx_msec_t                valid, invalid;
    ngx_uint_t                i;
    ngx_shm_zone_t           *shm_zone;
    ngx_http_oip_sig_zone_t  *z;

    value = cf->args->elts;

    size = 0;
    name.len = 0;
    valid = 60000;
    invalid = 5000;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {
            rv = ngx_http_oip_zone_arg(cf, &value[i], &name, &size);

            if (rv != NGX_CONF_OK) {
                return rv;
            }

            if (size < (ssize_t) (8 * ngx_pagesize)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "zone \"%V\" is too small", &value[i]);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "valid=", 6) == 0
            || ngx_strncmp(value[i].data, "invalid=", 8) == 0)
        {
            p = (u_char *) ngx_strchr(value[i].data, '=') + 1;

            s.data = p;
            s.len = value[i].data + value[i].len - p;

            if (value[i].data[0] == 'v') {
                valid = ngx_parse_time(&s, 0);

            } else {
                invalid = ngx_parse_time(&s, 0);
            }

            if (valid == (ngx_msec_t) NGX_ERROR
                || invalid == (ngx_msec_t) NGX_ERROR)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid time \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%V\" must have \"zone\" parameter",
                           &cmd->name);
        return NGX_CONF_ERROR;
    }

    z = ngx_pcalloc(cf->pool, sizeof(ngx_http_oip_sig_zone_t));
    if (z == NULL) {
        return NGX_CONF_ERROR;
    }

    z->valid = valid;
    z->invalid = invalid;

    shm_zone = ngx_shared_memory_add(cf, &name, size, &ngx_http_oip_module);
    if (shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    if (shm_zone->data) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "%V \"%V\" is already declared",
                           &cmd->name, &name);
        return NGX_CONF_ERROR;
    }

    shm_zone->init = ngx_http_oip_sig_init_zone;
    shm_zone->data = z;

    return NGX_CONF_OK;
}


/* a reload keeps the signatures: the old zone's are taken over */

static ngx_int_t
ngx_http_oip_sig_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    size_t                    len;
    ngx_int_t                 rc;
    ngx_http_oip_sig_zone_t  *z;

    rc = ngx_http_oip_zone_header(shm_zone, data,
                                  sizeof(ngx_http_oip_sig_shctx_t));
    if (rc != NGX_DONE) {
        return rc;
    }

    z = shm_zone->data;

    ngx_rbtree_init(&z->sh->rbtree, &z->sh->sentinel,
                    ngx_http_oip_sig_insert);
    ngx_queue_init(&z->sh->queue);

    len = sizeof(" in oip_signature_zone \"\"") + shm_zone->shm.name.len;

    z->shpool->log_ctx = ngx_slab_alloc(z->shpool, len);
    if (z->shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(z->shpool->log_ctx, " in oip_signature_zone \"%V\"%Z",
                &shm_zone->shm.name);

    /* a full zone evicts: not worth a log line each time */
    z->shpool->log_nomem = 0;

    return NGX_OK;
}


/* by hash, then by key: equal hashes stay ordered for the lookup */

static void
ngx_http_oip_sig_insert(ngx_rbtree_node_t *temp, ngx_rbtree_node_t *node,
    ngx_rbtree_node_t *sentinel)
{
    ngx_rbtree_node_t        **p;
    ngx_http_oip_sig_node_t   *n, *t;

    for ( ;; ) {

        if (node->key < temp->key) {
            p = &temp->left;

        } else if (node->key > temp->key) {
            p = &temp->right;

        } else {
            n = (ngx_http_oip_sig_node_t *) node;
            t = (ngx_http_oip_sig_node_t *) temp;

            p = (ngx_memn2cmp(n->key, t->key, n->len, t->len) < 0)
                ? &temp->left : &temp->right;
        }

        if (*p == sentinel) {
            break;
        }

        temp = *p;
    }

    *p = node;
    node->parent = temp;
    node->left = sentinel;
    node->right = sentinel;
    ngx_rbt_red(node);
}

/*
 * The zone's entry for key: NGX_OK with *sig a copy in pool,
 * NGX_HTTP_NOT_FOUND for a model known not to be there, NGX_DECLINED for
 * a miss, NGX_ERROR.  *refresh: the caller refreshes it (stale, and no
 * refresh began lately).
 */

ngx_int_t
ngx_http_oip_sig_cache_lookup(ngx_shm_zone_t *zone, ngx_str_t *key,
    uint32_t hash, ngx_pool_t *pool, oip_signature_t **sig,
    ngx_uint_t *refresh)
{
    ngx_int_t                 rc;
    ngx_msec_t                now;
    ngx_msec_int_t            age;
    ngx_http_oip_sig_zone_t  *z;
    ngx_http_oip_sig_node_t  *node;

    z = zone->data;
    now = ngx_current_msec;
    *refresh = 0;

    ngx_shmtx_lock(&z->shpool->mutex);

    node = ngx_http_oip_sig_find(z, key, hash);

    if (node == NULL) {
        rc = NGX_DECLINED;
        goto done;
    }

    age = (ngx_msec_int_t) (now - node->fetched);

    if (node->sig == NULL) {
        /* not found: for invalid=, then asked again */
        rc = (age < (ngx_msec_int_t) z->invalid) ? NGX_HTTP_NOT_FOUND
                                                  : NGX_DECLINED;
        goto done;
    }

    *sig = ngx_palloc(pool, node->sig_len);
    if (*sig == NULL) {
        rc = NGX_ERROR;
        goto done;
    }

    ngx_memcpy(*sig, node->sig, node->sig_len);

    if (age >= (ngx_msec_int_t) z->valid
        && (node->refresh == 0
            || (ngx_msec_int_t) (now - node->refresh)
               >= (ngx_msec_int_t) ngx_max(z->invalid,
                                           NGX_HTTP_OIP_SIG_AGAIN)))
    {
        node->refresh = now;
        *refresh = 1;
    }

    ngx_queue_remove(&node->queue);
    ngx_queue_insert_head(&z->sh->queue, &node->queue);

    rc = NGX_OK;

done:

    ngx_shmtx_unlock(&z->shpool->mutex);

    return rc;
}


/*
 * After a misfit: may key be fetched again now?  Once a second at most,
 * and not within a second of its fetch, so that a client sending wrong
 * requests does not hammer the metadata.  A yes is marked.
 */

ngx_uint_t
ngx_http_oip_sig_cache_refetch(ngx_shm_zone_t *zone, ngx_str_t *key,
    uint32_t hash)
{
    ngx_uint_t                again;
    ngx_msec_int_t            age;
    ngx_http_oip_sig_zone_t  *z;
    ngx_http_oip_sig_node_t  *node;

    z = zone->data;
    again = 0;

    ngx_shmtx_lock(&z->shpool->mutex);

    node = ngx_http_oip_sig_find(z, key, hash);

    if (node) {
        age = (ngx_msec_int_t) (ngx_current_msec - node->fetched);

        if (age >= NGX_HTTP_OIP_SIG_AGAIN
            && (ngx_msec_int_t) (ngx_current_msec - node->refetch)
               >= NGX_HTTP_OIP_SIG_AGAIN)
        {
            node->refetch = ngx_current_msec;
            again = 1;
        }
    }

    ngx_shmtx_unlock(&z->shpool->mutex);

    return again;
}


static ngx_http_oip_sig_node_t *
ngx_http_oip_sig_find(ngx_http_oip_sig_zone_t *z, ngx_str_t *key,
    uint32_t hash)
{
    ngx_int_t                 rc;
    ngx_rbtree_node_t        *node, *sentinel;
    ngx_http_oip_sig_node_t  *sn;

    node = z->sh->rbtree.root;
    sentinel = z->sh->rbtree.sentinel;

    while (node != sentinel) {

        if (hash < node->key) {
            node = node->left;
            continue;
        }

        if (hash > node->key) {
            node = node->right;
            continue;
        }

        sn = (ngx_http_oip_sig_node_t *) node;

        rc = ngx_memn2cmp(key->data, sn->key, key->len, (size_t) sn->len);

        if (rc == 0) {
            return sn;
        }

        node = (rc < 0) ? node->left : node->right;
    }

    return NULL;
}


/*
 * The outcome of a fetch into the zone: a signature, or NULL for "not
 * found".  A full zone gives up its least recently used entries; a
 * signature larger than the zone is not kept (the request still has its
 * own).
 */

void
ngx_http_oip_sig_cache_store(ngx_shm_zone_t *zone, ngx_str_t *key,
    uint32_t hash, oip_signature_t *signature, ngx_str_t *model,
    ngx_log_t *log)
{
    size_t                    n;
    u_char                   *sig;
    uint32_t                  len;
    ngx_http_oip_sig_zone_t  *z;
    ngx_http_oip_sig_node_t  *node;

    if (key->len > 65535) {
        return;
    }

    z = zone->data;
    len = signature ? signature->size : 0;

    ngx_shmtx_lock(&z->shpool->mutex);

    node = ngx_http_oip_sig_find(z, key, hash);

    if (node) {
        ngx_queue_remove(&node->queue);

        if (node->sig) {
            ngx_slab_free_locked(z->shpool, node->sig);
            node->sig = NULL;
        }

    } else {
        n = offsetof(ngx_http_oip_sig_node_t, key) + key->len;

        node = ngx_http_oip_sig_alloc(z, n, NULL);
        if (node == NULL) {
            goto full;
        }

        node->node.key = hash;
        node->len = (u_short) key->len;
        node->sig = NULL;
        ngx_memcpy(node->key, key->data, key->len);

        ngx_rbtree_insert(&z->sh->rbtree, &node->node);
    }

    node->fetched = ngx_current_msec;
    node->refresh = 0;
    node->refetch = 0;
    node->sig_len = 0;

    /* the entry itself is newest: kept while its signature is made room */

    ngx_queue_insert_head(&z->sh->queue, &node->queue);

    if (len) {
        sig = ngx_http_oip_sig_alloc(z, len, node);

        if (sig == NULL) {
            ngx_queue_remove(&node->queue);
            ngx_rbtree_delete(&z->sh->rbtree, &node->node);
            ngx_slab_free_locked(z->shpool, node);
            goto full;
        }

        ngx_memcpy(sig, signature, len);
        node->sig = sig;
        node->sig_len = len;
    }

    ngx_shmtx_unlock(&z->shpool->mutex);

    return;

full:

    ngx_shmtx_unlock(&z->shpool->mutex);

    ngx_log_error(NGX_LOG_WARN, log, 0,
                  "oip: the signature of \"%V\" (%uD bytes) does not fit "
                  "in its oip_signature_zone: not kept", model, len);
}


/*
 * Memory from the zone, locked: the least recently used entries (but
 * keep) give way until it fits, or there is nothing left to give.
 */

static void *
ngx_http_oip_sig_alloc(ngx_http_oip_sig_zone_t *z, size_t size,
    ngx_http_oip_sig_node_t *keep)
{
    void                     *p;
    ngx_queue_t              *q;
    ngx_http_oip_sig_node_t  *old;

    for ( ;; ) {
        p = ngx_slab_alloc_locked(z->shpool, size);

        if (p || ngx_queue_empty(&z->sh->queue)) {
            return p;
        }

        q = ngx_queue_last(&z->sh->queue);
        old = ngx_queue_data(q, ngx_http_oip_sig_node_t, queue);

        if (old == keep) {
            return NULL;
        }

        ngx_queue_remove(q);
        ngx_rbtree_delete(&z->sh->rbtree, &old->node);

        if (old->sig) {
            ngx_slab_free_locked(z->shpool, old->sig);
        }

        ngx_slab_free_locked(z->shpool, old);
    }
}

