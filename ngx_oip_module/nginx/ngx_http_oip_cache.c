
/*
 * Copyright (C) ngx_oip_module authors
 *
 * Caching inference answers with nginx's own proxy_cache: $oip_digest,
 * the SHA-256 of the codec's canonical form of a request (the same for
 * every encoding of the same tensors), computed only when some
 * configuration uses the variable; and an answer this module refuses
 * taken out of the cache it was stored in.
 */


#include "ngx_http_oip_module.h"

#include <openssl/evp.h>


static void ngx_http_oip_digest_update(void *data, const uint8_t *p,
    size_t len);


static ngx_str_t  ngx_http_oip_digest_name = ngx_string("oip_digest");


/*
 * After the configuration is read: is $oip_digest used anywhere (a
 * cache key, a map, a log format)?  Its cost is paid only then.
 */

ngx_int_t
ngx_http_oip_digest_init(ngx_conf_t *cf)
{
    ngx_uint_t                  i;
    ngx_http_variable_t        *v;
    ngx_http_oip_main_conf_t   *omcf;
    ngx_http_core_main_conf_t  *cmcf;

    omcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_oip_module);
    cmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_core_module);

    v = cmcf->variables.elts;

    for (i = 0; i < cmcf->variables.nelts; i++) {
        if (v[i].name.len == ngx_http_oip_digest_name.len
            && ngx_strncmp(v[i].name.data, ngx_http_oip_digest_name.data,
                           ngx_http_oip_digest_name.len) == 0)
        {
            omcf->digest = 1;
            break;
        }
    }

    return NGX_OK;
}


/* the codec's canonical form goes into a SHA-256 as it is written */

ngx_int_t
ngx_http_oip_digest_begin(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_digest_t *d, oip_options_t *opt)
{
    EVP_MD_CTX                *md;
    ngx_http_oip_main_conf_t  *omcf;

    omcf = ngx_http_get_module_main_conf(r, ngx_http_oip_module);

    if (!omcf->digest) {
        return NGX_DECLINED;
    }

    md = EVP_MD_CTX_new();

    if (md == NULL || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0,
                      "oip: SHA-256 unavailable, $oip_digest left empty");
        EVP_MD_CTX_free(md);
        return NGX_DECLINED;
    }

    d->data = md;
    d->update = ngx_http_oip_digest_update;

    opt->digest = d;
    opt->version = ctx->version.data;
    opt->version_len = ctx->version.len;

    return NGX_OK;
}


/* the digest in hex, when the request was accepted and is all there */

void
ngx_http_oip_digest_end(ngx_http_request_t *r, ngx_http_oip_ctx_t *ctx,
    oip_digest_t *d, ngx_uint_t ok)
{
    u_char         *p;
    unsigned int    n;
    EVP_MD_CTX     *md;
    unsigned char   sum[EVP_MAX_MD_SIZE];

    md = d->data;

    ngx_str_null(&ctx->vars.digest);

    if (ok && EVP_DigestFinal_ex(md, sum, &n) == 1) {
        p = ngx_pnalloc(r->pool, 2 * n);

        if (p) {
            ctx->vars.digest.data = p;
            ctx->vars.digest.len = ngx_hex_dump(p, sum, n) - p;
        }
    }

    EVP_MD_CTX_free(md);

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: digest \"%V\"", &ctx->vars.digest);
}


static void
ngx_http_oip_digest_update(void *data, const uint8_t *p, size_t len)
{
    (void) EVP_DigestUpdate(data, p, len);
}


/*
 * An answer this module refuses (a 200 it cannot read becomes a 502) must
 * not be served from the cache afterwards.  nginx commits the cache file
 * when the upstream is done, before the body filter sees the end of the
 * answer (the last buffer comes when the request is finalized): when it
 * is not committed yet, it is dropped; when it is, the entry is taken
 * out of the cache as a purge would (the node marked absent, its file
 * deleted), and the next request for it is a MISS.
 */

void
ngx_http_oip_uncache(ngx_http_request_t *r)
{
#if (NGX_HTTP_CACHE)
    ngx_http_cache_t       *c;
    ngx_http_upstream_t    *u;
    ngx_http_file_cache_t  *cache;

    u = r->upstream;
    c = r->cache;

    if (u == NULL || c == NULL || r->cached || !u->cacheable) {
        return;
    }

    u->cacheable = 0;

    if (!c->updated) {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "oip: refused answer not stored");

        ngx_http_file_cache_free(c, u->pipe ? u->pipe->temp_file : NULL);
        return;
    }

    if (c->node == NULL) {
        return;
    }

    cache = c->file_cache;

    ngx_shmtx_lock(&cache->shpool->mutex);

    if (c->node->exists) {
        c->node->exists = 0;
        cache->sh->size -= c->node->fs_size;
        c->node->fs_size = 0;
    }

    ngx_shmtx_unlock(&cache->shpool->mutex);

    if (ngx_delete_file(c->file.name.data) == NGX_FILE_ERROR
        && ngx_errno != NGX_ENOENT)
    {
        ngx_log_error(NGX_LOG_CRIT, r->connection->log, ngx_errno,
                      ngx_delete_file_n " \"%s\" failed", c->file.name.data);
    }

    ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                  "oip: refused answer taken out of the cache");
#endif
}
