
/*
 * Copyright (C) ngx_oip_module authors
 *
 * The one runner of conversions: each path builds its conversion (the
 * codec's call, and what follows the verdict) and hands it here, which
 * runs it in the worker or, for one above oip_thread_pool's threshold, in
 * an nginx thread pool, so that a big tensor does not stall the small
 * requests of its worker.  Both end in the path's done(), in the worker.
 *
 * In a thread the codec runs on a pool of its own, created here before
 * the task is posted and destroyed with the request: nginx's pools are
 * not thread-safe, and the worker goes on allocating from the request's
 * pool meanwhile.  The request is parked as nginx parks it for aio
 * threads (r->main->blocked keeps it from being freed, r->aio keeps the
 * writer waiting) and resumed by the completion handler, in the worker's
 * event loop, which gives the result back to the path that posted it.
 */


#include "ngx_http_oip_module.h"


static void ngx_http_oip_run_codec(ngx_http_oip_run_t *run,
    const oip_alloc_t *alloc);

#if (NGX_THREADS)

/* how often the timer that keeps a quitting worker waiting comes back */
#define NGX_HTTP_OIP_JOB_HOLD  60000


/* a conversion posted to a thread: a copy of it, and the thread's part */

typedef struct {
    ngx_http_oip_run_t     run;
    ngx_thread_task_t     *task;
    ngx_event_t            hold;        /* a timer while it runs */
    ngx_pool_t            *pool;        /* the thread's, freed with r */
    ngx_log_t              log;
    oip_alloc_t            alloc;
} ngx_http_oip_job_t;


static ngx_int_t ngx_http_oip_job_post(ngx_http_oip_run_t *run);
static void ngx_http_oip_job_run(void *data, ngx_log_t *log);
static void ngx_http_oip_job_event(ngx_event_t *ev);
static void ngx_http_oip_job_hold(ngx_event_t *ev);
static void ngx_http_oip_job_cleanup(void *data);

#endif


/* oip_thread_pool NAME [threshold=SIZE] | off */

char *
ngx_http_oip_thread_pool(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
#if (NGX_THREADS)

    ngx_http_oip_loc_conf_t *olcf = conf;

    ssize_t     size;
    ngx_str_t  *value, s;
    ngx_uint_t  i;

    if (olcf->thread_pool != NGX_CONF_UNSET_PTR) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "off") == 0) {
        if (cf->args->nelts > 2) {
            return "takes no parameters with \"off\"";
        }

        olcf->thread_pool = NULL;
        return NGX_CONF_OK;
    }

    /* declared by thread_pool, or "default" as aio threads adds it */

    olcf->thread_pool = ngx_thread_pool_add(cf, &value[1]);
    if (olcf->thread_pool == NULL) {
        return NGX_CONF_ERROR;
    }

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "threshold=", 10) == 0) {
            s.len = value[i].len - 10;
            s.data = value[i].data + 10;

            size = ngx_parse_size(&s);
            if (size == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid threshold \"%V\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            olcf->thread_threshold = (size_t) size;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\"", &value[i]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;

#else

    return "needs nginx built --with-threads";

#endif
}


/*
 * Runs a conversion: in a thread when the location's pool takes it
 * (NGX_BUSY: run->done() and run->resume() are called later, in the
 * worker), else here; then what run->done() returned.  The run may be
 * the caller's, on its stack: a thread gets a copy.
 */

ngx_int_t
ngx_http_oip_run(ngx_http_oip_run_t *run)
{
    oip_alloc_t  alloc;

#if (NGX_THREADS)
    if (ngx_http_oip_job_post(run) == NGX_OK) {
        return NGX_BUSY;
    }
#endif

    ngx_http_oip_allocator(run->r, &alloc);
    ngx_http_oip_run_codec(run, &alloc);

    return run->done(run->r, run);
}


/* the codec's call, in the worker or in a thread */

static void
ngx_http_oip_run_codec(ngx_http_oip_run_t *run, const oip_alloc_t *alloc)
{
    uint64_t  start;

    start = ngx_http_oip_usec();

    if (run->response) {
        run->rc = oip_response_process(&run->res, alloc, &run->opt,
                                       run->wish, &run->framing, run->body,
                                       run->len);

    } else {
        run->rc = oip_request_process(&run->res, alloc, &run->opt,
                                      &run->framing, run->body, run->len);
    }

    run->usec = ngx_http_oip_usec() - start;
}


#if (NGX_THREADS)

/*
 * NGX_OK: a copy of the run is posted to the location's pool;
 * NGX_DECLINED: it runs in the worker (no pool here, below the
 * threshold, no memory for the job, or the pool's queue is full).
 */

static ngx_int_t
ngx_http_oip_job_post(ngx_http_oip_run_t *run)
{
    ngx_pool_cleanup_t       *cln;
    ngx_http_request_t       *r;
    ngx_http_oip_job_t       *job;
    ngx_http_oip_loc_conf_t  *olcf;

    r = run->r;
    olcf = ngx_http_get_module_loc_conf(r, ngx_http_oip_module);

    if (olcf->thread_pool == NULL || run->len < olcf->thread_threshold) {
        return NGX_DECLINED;
    }

    job = ngx_pcalloc(r->pool, sizeof(ngx_http_oip_job_t));
    if (job == NULL) {
        return NGX_DECLINED;
    }

    job->task = ngx_thread_task_alloc(r->pool, 0);
    if (job->task == NULL) {
        return NGX_DECLINED;
    }

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_DECLINED;
    }

    /*
     * The thread logs only if its pool cannot allocate: with the
     * connection's file and level, not its handler, which reads the
     * request the worker owns.
     */

    job->log = *r->connection->log;
    job->log.handler = NULL;
    job->log.data = NULL;

    job->pool = ngx_create_pool(NGX_DEFAULT_POOL_SIZE, &job->log);
    if (job->pool == NULL) {
        return NGX_DECLINED;
    }

    /* the result lives in it: freed with the request, never before */

    cln->handler = ngx_http_oip_job_cleanup;
    cln->data = job->pool;

    ngx_http_oip_pool_allocator(job->pool, &job->alloc);

    /* the copy's digest and gRPC options are its own: not on a stack */

    job->run = *run;
    job->run.threaded = 1;

    if (run->opt.digest == &run->digest) {
        job->run.opt.digest = &job->run.digest;
    }

    if (run->opt.grpc == &run->grpc) {
        job->run.opt.grpc = &job->run.grpc;
    }

    job->task->ctx = job;
    job->task->handler = ngx_http_oip_job_run;
    job->task->event.data = job;
    job->task->event.handler = ngx_http_oip_job_event;

    if (ngx_thread_task_post(olcf->thread_pool, job->task) != NGX_OK) {
        ngx_log_error(NGX_LOG_WARN, r->connection->log, 0,
                      "oip: thread pool busy, converting %uz bytes in the "
                      "worker", run->len);
        return NGX_DECLINED;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: %s of %uz bytes converted in a thread",
                   run->response ? "answer" : "request", run->len);

    r->main->blocked++;
    r->aio = 1;

    /*
     * A worker told to quit gracefully waits for its timers, not for its
     * connections: a request in a thread has none of its own (its body
     * is read, its upstream not reached), and would be cut off.
     */

    job->hold.handler = ngx_http_oip_job_hold;
    job->hold.data = r->connection;     /* what nginx's debug log reads */
    job->hold.log = r->connection->log;

    ngx_add_timer(&job->hold, NGX_HTTP_OIP_JOB_HOLD);

    return NGX_OK;
}


/* in the thread: the codec alone, on the job's memory */

static void
ngx_http_oip_job_run(void *data, ngx_log_t *log)
{
    ngx_http_oip_job_t *job = data;

    ngx_http_oip_run_codec(&job->run, &job->alloc);
}


/* back in the worker: the request is the worker's again */

static void
ngx_http_oip_job_event(ngx_event_t *ev)
{
    ngx_http_oip_job_t *job = ev->data;

    ngx_int_t            rc;
    ngx_http_request_t  *r;

    r = job->run.r;

    r->main->blocked--;
    r->aio = 0;

    if (job->hold.timer_set) {
        ngx_del_timer(&job->hold);
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "oip: thread done: %s, %uL us",
                   job->run.rc == 0 ? "converted" : "refused",
                   job->run.usec);

    rc = job->run.done(r, &job->run);

    job->run.resume(r, rc);
}


static void
ngx_http_oip_job_hold(ngx_event_t *ev)
{
    ngx_add_timer(ev, NGX_HTTP_OIP_JOB_HOLD);
}


static void
ngx_http_oip_job_cleanup(void *data)
{
    ngx_destroy_pool(data);
}

#endif
