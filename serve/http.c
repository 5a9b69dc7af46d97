/* http.c — the HTTP side of `lean serve`, over libmicrohttpd (Debian's libmicrohttpd).
 *
 * A thread per connection (MHD_USE_THREAD_PER_CONNECTION): a request's body is gathered (at
 * most srv->max_body_bytes: more is 413; a connection silent for srv->timeout_s is closed by
 * libmicrohttpd, with no reply: it calls no handler first; a body still arriving, trickled,
 * srv->timeout_s after its headers is answered 408 at its next piece and closed: late_body),
 * then routed:
 *
 *   POST /v1/chat/completions, /v1/completions (also without /v1)  a job for the engine
 *   GET  /v1/models (also /models), /health                        api.c
 *   POST /tokenize, /detokenize                                    llama-server's spelling
 *   OPTIONS any                                                    CORS preflight, 204
 *   GET  anything else                                             a file of srv->web_dir
 *                                                                  (the chat page) or 404
 *
 * A job's connection thread waits on the job: for a whole reply until it is done, for a
 * stream (server-sent events, chunked) in the content reader, which hands out each piece of
 * text as the engine makes it final. A client that goes away is seen by the engine (its
 * socket hung up, also while the job is queued) or here (the response freed before the job
 * was done): either cancels the job and frees its slot at the next step (or takes it out of
 * the queue). The job's fd is set to -1 here before libmicrohttpd closes the socket, so the
 * engine never polls a number reused since.
 *
 * Sections: replies, request bodies, streams, static files, routing, start and stop. */
#include "serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct serve_http {
    serve_server *srv;
    struct MHD_Daemon *d;
};

/* ---- replies ---- */

#define ALLOW_ORIGIN "*" /* every reply's Access-Control-Allow-Origin (late_body's too) */
static void cors(struct MHD_Response *r) {
    MHD_add_response_header(r, "Access-Control-Allow-Origin", ALLOW_ORIGIN);
}

/* Queues a JSON reply and frees its body. */
static enum MHD_Result send_reply(struct MHD_Connection *c, api_reply a) {
    if (!a.body) a = api_error(500, NULL, NULL, "no memory for the reply");
    if (!a.body) return MHD_NO;
    size_t n = strlen(a.body);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, a.body, MHD_RESPMEM_MUST_FREE);
    if (!r) return free(a.body), MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    cors(r);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)a.status, r);
    MHD_destroy_response(r);
    return ok;
}

/* 408 for a body not whole srv->timeout_s after its headers, at its next piece. libmicrohttpd
 * 0.9.75 takes no response while a body is half read (MHD_queue_response answers MHD_NO), so
 * the reply is written to the socket here, where libmicrohttpd has sent nothing and reads no
 * more (the handler is running), and the connection is then closed (MHD_NO). */
static enum MHD_Result late_body(struct MHD_Connection *c, unsigned timeout_s) {
    api_reply a = api_error(408, "request_timeout", NULL, "the request body was not whole %u s after its headers",
                            timeout_s);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const size_t len = a.body ? strlen(a.body) : 0;
    char head[192];
    const int n = snprintf(head, sizeof head,
                           "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
                           "Access-Control-Allow-Origin: " ALLOW_ORIGIN "\r\nContent-Length: %zu\r\n"
                           "Connection: close\r\n\r\n",
                           len);
    if (ci && a.body && n > 0 && (size_t)n < sizeof head && send(ci->connect_fd, head, (size_t)n, MSG_NOSIGNAL) == n)
        (void)!send(ci->connect_fd, a.body, len, MSG_NOSIGNAL);
    free(a.body);
    return MHD_NO;
}

/* ---- request bodies ---- */

typedef struct conn {
    char *body;
    size_t n, cap;
    int too_big;
    struct timespec t0; /* the headers' arrival (CLOCK_MONOTONIC): the body's deadline counts from it */
} conn;

/* Whole seconds since k's headers came. */
static long long conn_age_s(const conn *k) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)(t.tv_sec - k->t0.tv_sec) - (t.tv_nsec < k->t0.tv_nsec);
}

/* 0 (past max: dropped, too_big set), or -1 out of memory. */
static int body_append(conn *k, const char *data, size_t n, size_t max) {
    if (k->too_big || k->n + n > max) return k->too_big = 1, 0;
    return text_append(&k->body, &k->n, &k->cap, data, n);
}

static void request_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc) {
    (void)cls, (void)c, (void)tc;
    conn *k = *con_cls;
    if (k) free(k->body), free(k);
    *con_cls = NULL;
}

/* ---- streams ---- */

typedef struct stream {
    serve_server *srv;
    serve_job *job;
    char *out;      /* the event being written, from off */
    size_t off;
    size_t n_sent;  /* job text already in events */
    int phase;      /* 0 first chunk, 1 text, 2 usage, 3 [DONE], 4 ended */
} stream;

/* The next event of the stream, waiting for the engine; NULL at the end (*err on failure). */
static char *next_event(stream *s, int *err) {
    serve_job *j = s->job;
    serve_server *srv = s->srv;
    char *e = NULL;
    pthread_mutex_lock(&srv->mu);
    switch (s->phase) {
    case 0:
        e = api_stream_first(srv, j), s->phase = 1;
        break;
    case 1:
        while (j->n_text == s->n_sent && !j->done) pthread_cond_wait(&j->cv, &srv->mu);
        if (j->n_text > s->n_sent) {
            e = api_stream_delta(srv, j, j->text + s->n_sent, j->n_text - s->n_sent);
            s->n_sent = j->n_text;
        } else if (j->cancelled) {
            *err = 1;
        } else if (j->http_status) {
            e = api_stream_error(j), s->phase = 3;
        } else {
            e = api_stream_final(srv, j), s->phase = 2;
        }
        break;
    case 2:
        e = j->include_usage ? api_stream_usage(srv, j) : strdup(""), s->phase = 3;
        break;
    case 3:
        e = strdup("data: [DONE]\n\n"), s->phase = 4;
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&srv->mu);
    if (!e && s->phase != 4) *err = 1;
    return e;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream *s = cls;
    (void)pos;
    for (;;) {
        if (s->out && s->out[s->off]) {
            size_t n = strlen(s->out + s->off);
            if (n > max) n = max;
            memcpy(buf, s->out + s->off, n);
            s->off += n;
            return (ssize_t)n;
        }
        free(s->out);
        s->out = NULL, s->off = 0;
        if (s->phase == 4) return MHD_CONTENT_READER_END_OF_STREAM;
        int err = 0;
        s->out = next_event(s, &err);
        if (err) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void stream_free(void *cls) {
    stream *s = cls;
    pthread_mutex_lock(&s->srv->mu);
    s->job->fd = -1;
    if (!s->job->done) s->job->cancelled = 1;
    pthread_cond_signal(&s->srv->wake);
    job_unref_locked(s->job);
    pthread_mutex_unlock(&s->srv->mu);
    free(s->out);
    free(s);
}

/* ---- jobs ---- */

static enum MHD_Result run_job(serve_http *h, struct MHD_Connection *c, job_kind kind, const conn *k) {
    serve_server *srv = h->srv;
    serve_job *j;
    api_reply fail;
    if (api_parse_job(srv, kind, k->body ? k->body : "", k->n, &j, &fail)) return send_reply(c, fail);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->fd = ci ? ci->connect_fd : -1;
    if (engine_submit(srv, j) != 0) {
        pthread_mutex_lock(&srv->mu);
        job_unref_locked(j);
        pthread_mutex_unlock(&srv->mu);
        return send_reply(c, api_error(503, "server_busy", NULL, "the server is busy (%d requests queued) or stopping",
                                       srv->max_queued));
    }
    if (!j->stream) {
        pthread_mutex_lock(&srv->mu);
        while (!j->done) pthread_cond_wait(&j->cv, &srv->mu);
        j->fd = -1;
        int cancelled = j->cancelled;
        api_reply r = cancelled ? (api_reply){0, NULL} : api_job_reply(srv, j);
        job_unref_locked(j);
        pthread_mutex_unlock(&srv->mu);
        return cancelled ? MHD_NO : send_reply(c, r);
    }
    stream *s = calloc(1, sizeof *s);
    struct MHD_Response *r = s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, s, stream_free)
                               : NULL;
    if (!r) {
        free(s);
        job_cancel(srv, j);
        pthread_mutex_lock(&srv->mu);
        job_unref_locked(j);
        pthread_mutex_unlock(&srv->mu);
        return send_reply(c, api_error(500, NULL, NULL, "no memory for a stream"));
    }
    s->srv = srv, s->job = j;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    cors(r);
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r); /* stream_free runs when the connection is done with it */
    return ok;
}

/* ---- static files ---- */

static const char *mime(const char *path) {
    static const char *const types[][2] = {
        {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"}, {".css", "text/css; charset=utf-8"},
        {".json", "application/json"}, {".wasm", "application/wasm"}, {".svg", "image/svg+xml"},
        {".png", "image/png"}, {".ico", "image/x-icon"}, {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i][0]) == 0) return types[i][1];
    return "application/octet-stream";
}

/* A file under web_dir; ".." anywhere, and anything but a regular file, is 404. The page is
 * served cross-origin isolated (COOP/COEP), as scripts/serve_web.mjs does: the threaded wasm
 * build needs SharedArrayBuffer. */
static enum MHD_Result send_file(serve_http *h, struct MHD_Connection *c, const char *url) {
    const char *dir = h->srv->web_dir;
    char path[4096];
    if (!dir || url[0] != '/' || strstr(url, "..") || strchr(url, '\\') ||
        snprintf(path, sizeof path, "%s%s", dir, strcmp(url, "/") == 0 ? "/index.html" : url) >= (int)sizeof path)
        return send_reply(c, api_error(404, "not_found", NULL, "no such page: %s", url));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        if (fd >= 0) close(fd);
        return send_reply(c, api_error(404, "not_found", NULL, "no such page: %s", url));
    }
    struct MHD_Response *r = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
    if (!r) return close(fd), MHD_NO;
    MHD_add_response_header(r, "Content-Type", mime(path));
    MHD_add_response_header(r, "Cross-Origin-Opener-Policy", "same-origin");
    MHD_add_response_header(r, "Cross-Origin-Embedder-Policy", "require-corp");
    MHD_add_response_header(r, "Cross-Origin-Resource-Policy", "same-origin");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* ---- routing ---- */

static int is_path(const char *url, const char *api) {
    return strcmp(url, api) == 0 || (strncmp(api, "/v1/", 4) == 0 && strcmp(url, api + 3) == 0);
}

static enum MHD_Result route(serve_http *h, struct MHD_Connection *c, const char *url, const char *method,
                             const conn *k) {
    serve_server *srv = h->srv;
    int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0, post = strcmp(method, "POST") == 0;
    const char *body = k->body ? k->body : "";
    static const struct {
        const char *path;
        int post;
    } api[] = {{"/v1/chat/completions", 1}, {"/v1/completions", 1}, {"/tokenize", 1},
               {"/detokenize", 1},          {"/v1/models", 0},      {"/health", 0}};
    for (size_t i = 0; i < sizeof api / sizeof api[0]; i++) {
        if (!is_path(url, api[i].path)) continue;
        if (api[i].post ? !post : !get)
            return send_reply(c, api_error(405, "method_not_allowed", NULL, "%s takes %s, not %s", api[i].path,
                                           api[i].post ? "POST" : "GET", method));
        switch (i) {
        case 0: return run_job(h, c, JOB_CHAT, k);
        case 1: return run_job(h, c, JOB_COMPLETION, k);
        case 2: return send_reply(c, api_tokenize(srv, body, k->n));
        case 3: return send_reply(c, api_detokenize(srv, body, k->n));
        case 4: return send_reply(c, api_models(srv));
        default: return send_reply(c, api_health(srv));
        }
    }
    if (get) return send_file(h, c, url);
    return send_reply(c, api_error(404, "not_found", NULL, "no such endpoint: %s %s", method, url));
}

/* 413: the body is over --max-body. */
static enum MHD_Result too_big(serve_http *h, struct MHD_Connection *c) {
    return send_reply(c, api_error(413, "request_too_large", NULL, "the request body is over %zu bytes",
                                   h->srv->max_body_bytes));
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    serve_http *h = cls;
    conn *k = *con_cls;
    (void)version;
    if (!k) { /* the headers: a body announced past the limit is refused. A client waiting for
               * "100 Continue" is answered now (libmicrohttpd reads none of the body); one already
               * sending would meet a closed socket (EPIPE, never the reply), so its body is read
               * and dropped, then answered */
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        *con_cls = k;
        clock_gettime(CLOCK_MONOTONIC, &k->t0);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
        if (cl && strtoull(cl, NULL, 10) > h->srv->max_body_bytes) {
            if (expect && strcasecmp(expect, "100-continue") == 0) return too_big(h, c);
            k->too_big = 1;
        }
        return MHD_YES;
    }
    if (*upload_size) {
        /* a trickle keeps libmicrohttpd's idle timer from ever firing */
        if (conn_age_s(k) >= (long long)h->srv->timeout_s) return late_body(c, h->srv->timeout_s);
        if (body_append(k, upload, *upload_size, h->srv->max_body_bytes) != 0) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (k->too_big) return too_big(h, c);
    if (strcmp(method, "OPTIONS") == 0) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        cors(r);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Content-Type, Authorization");
        enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
        MHD_destroy_response(r);
        return ok;
    }
    return route(h, c, url, method, k);
}

/* ---- start and stop ---- */

serve_http *http_start(serve_server *srv, const char *host, int *port, char *msg, size_t cap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", *port);
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc != 0) return snprintf(msg, cap, "cannot resolve '%s': %s", host, gai_strerror(rc)), NULL;
    serve_http *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        return snprintf(msg, cap, "no memory"), NULL;
    }
    h->srv = srv;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0) | (srv->verbosity > 0 ? MHD_USE_ERROR_LOG : 0);
    errno = 0;
    h->d = MHD_start_daemon(flags, (uint16_t)*port, NULL, NULL, handle, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)1024, MHD_OPTION_CONNECTION_TIMEOUT, srv->timeout_s,
                            MHD_OPTION_THREAD_STACK_SIZE, (size_t)(2u << 20), MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(msg, cap, "cannot listen on %s port %d%s%s", host, *port, errno ? ": " : "", errno ? strerror(errno) : "");
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    if (di) *port = di->port;
    return h;
}

void http_stop(serve_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
