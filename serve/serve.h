/* serve.h — what the files of `lean serve` share (docs/serve.md is the user's page).
 *
 *   cmd_serve.c  the command: flags, the model, the slots, the listening socket, signals
 *   job.c        a job's life: made for a request, shared by its connection and the engine
 *   engine.c     the slots and the one thread that computes: a queue of jobs, the prefix
 *                cache (a job takes the free slot whose KV shares most of its prompt), the
 *                prefill of a new job between steps, one step for every generating slot
 *                (lean_gen_next_batch: decode and draw), stop strings, the text handed to
 *                the waiting connection
 *   api.c        the OpenAI API as JSON (jansson): requests read into jobs, replies and
 *                stream chunks written, OpenAI-style error objects
 *   http.c       libmicrohttpd: routes, request bodies, server-sent events, static files
 *
 * Threads: libmicrohttpd runs a thread per connection; each parses its request, tokenizes it
 * (a lean_tokenizer may be used by many threads at once), queues a job and waits on the job's
 * condition variable. One engine thread owns every lean_ctx and sampler. srv->mu guards the
 * queue, the slots' job pointers and every job's output fields. Only this front end links
 * libmicrohttpd and jansson: the library (src/) stays free of both. */
#ifndef LEAN_SERVE_H
#define LEAN_SERVE_H

#include "lean.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- a job: one request's generation ---- */
typedef enum job_kind { JOB_CHAT, JOB_COMPLETION } job_kind;

typedef struct serve_job {
    /* the request: set before it is queued, never changed after */
    job_kind kind;
    int stream, include_usage;
    int32_t *prompt;              /* (n_prompt) ids, malloc'd */
    int32_t n_prompt;
    lean_sampler_params sampling;
    int32_t max_tokens;           /* most ids in the reply; 0 = until the context is full */
    char **stop;                  /* n_stop non-empty strings, malloc'd */
    int n_stop;
    lean_grammar *grammar;        /* response_format's, owned; NULL: free text. Used by the
                                     engine thread only once queued */
    uint32_t *allow;              /* logit_bias's mask (LEAN_MASK_WORDS(n_vocab) words, malloc'd):
                                     the ids every draw may take; NULL: no logit_bias */
    lean_logit_bias *bias;        /* logit_bias's values between -100 and 100 (sampling.logit_bias,
                                     n_logit_bias of them), malloc'd; NULL: none */
    int fd;                       /* the client's socket, watched for a hang-up; -1 none */
    char id[48];                  /* "chatcmpl-..." / "cmpl-..." */
    int64_t created_s;

    /* the output, under srv->mu */
    char *text;                   /* the reply text made final so far (stop strings cut) */
    size_t n_text, cap_text;
    int done;                     /* the engine has finished with it */
    const char *finish;           /* "stop", "length"; NULL while running or on error */
    int32_t n_cached;             /* prompt ids found in the slot's KV cache */
    int32_t n_gen;                /* ids drawn for the reply (an end-of-generation id not counted) */
    int cancelled;                /* the client went away, or the server stops */
    int http_status;              /* 0, or the status of an error the engine met */
    char error[512];
    double t_queued_ms, t_start_ms, t_first_ms, t_done_ms;

    int refs;                     /* the connection and the engine (freed at 0), under srv->mu */
    pthread_cond_t cv;            /* signalled on new text and when done */
    struct serve_job *next;       /* the queue */
} serve_job;

/* ---- the server ---- */
typedef struct serve_slot serve_slot; /* engine.c */

typedef struct serve_server {
    const lean_model *model;      /* (api.c reads only the fields below, not the model) */
    const lean_tokenizer *tok;
    const char *model_id;         /* what /v1/models lists and requests must name */
    const char *template_src;     /* the model's chat template, or NULL for ChatML */
    lean_chat_params chat;        /* its bos_token / eos_token, add_generation_prompt */
    int32_t n_vocab, n_ctx;       /* n_ctx: per slot */
    uint64_t n_params;            /* /v1/models */
    int64_t created_s;            /* when the server started (/v1/models) */
    size_t max_body_bytes;
    unsigned timeout_s;           /* closed: idle this long, or a body not whole this long after its headers */
    const char *web_dir;          /* served at /, or NULL */
    int verbosity;                /* -1 quiet, 0 one line per reply */
    lean_lora *const *loras;      /* (n_loras) the adapters every slot applies (--lora), with */
    const float *lora_scales;     /* (n_loras) their scales; owned by cmd_serve */
    int n_loras;

    serve_slot *slots;
    int n_slots;
    lean_ctx **step_ctx;          /* (n_slots) one step's contexts, their slots, the ids drawn */
    int *step_slot;
    int32_t *step_ids;
    lean_mask *step_allow;        /* (n_slots) one step's logit_bias masks, and the pointers the */
    const lean_mask **step_mask;  /*   step takes (NULL: a slot without one) */
    float *logits;                /* (n_vocab) a prompt's last logits (lean_gen_begin draws from the library's copy) */
    uint32_t *mask;               /* (LEAN_MASK_WORDS(n_vocab)) a grammar's mask, looked at before a step */

    pthread_mutex_t mu;
    pthread_cond_t wake;          /* the engine: a job was queued or cancelled, or stop */
    serve_job *queue_head, *queue_tail;
    int n_queued, max_queued;
    int stopping;
    uint64_t n_jobs;              /* jobs ever given a slot: the slots' LRU clock */
    uint64_t n_done, n_cancelled; /* jobs finished, and of them cancelled (/health) */
    int started;                  /* the engine thread has made its slots (1) or failed (-1) */
    int n_busy;                   /* slots with a job (/health) */
    pthread_t engine;
} serve_server;

/* ---- engine.c ---- */
/* Starts the engine thread, which makes n slots, each a context of srv->model with p (on that
 * thread: Dawn's OpenGL ES binds a device to the thread that opens it), and returns once they
 * are made; on failure the thread has ended and *err says why. srv->mu and srv->wake must be
 * initialized. */
lean_status engine_start(serve_server *srv, const lean_ctx_params *p, int n, int verbosity, lean_error *err);
/* Cancels every job, stops the engine thread and frees the slots (on that thread). */
void engine_stop(serve_server *srv);
/* Queues j (the engine takes a reference); 0, or -1 when the queue is full. Under no lock. */
int engine_submit(serve_server *srv, serve_job *j);
/* The backend's description, for the start-up line. */
const char *engine_backend_str(const serve_server *srv, char *text, size_t cap);

/* ---- job.c ---- */
/* Appends s[0..n) to the growing NUL-terminated text *buf of *len bytes (room *cap); -1 out of
 * memory (the text unchanged). */
int text_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n);
/* jobs, under no lock: */
serve_job *job_new(void);
/* Drops one reference (under srv->mu); frees at 0. */
void job_unref_locked(serve_job *j);
/* Marks j cancelled and wakes the engine. */
void job_cancel(serve_server *srv, serve_job *j);

/* ---- api.c: the OpenAI API ----
 * A reply is a status and a JSON body (malloc'd, NUL-terminated). */
typedef struct api_reply {
    int status;
    char *body;
} api_reply;

/* An OpenAI error object {"error": {"message", "type", "param", "code"}} with status. */
api_reply api_error(int status, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Reads a POST body into a job (*out) for kind, or fills *fail with the error to answer. */
int api_parse_job(const serve_server *srv, job_kind kind, const char *body, size_t n, serve_job **out,
                  api_reply *fail);
/* The finished job's reply (non-streaming), under srv->mu. */
api_reply api_job_reply(const serve_server *srv, const serve_job *j);
/* One server-sent event for a streaming job, malloc'd ("data: {...}\n\n"), under srv->mu:
 * a first chunk (role), a text delta, the last chunk (finish_reason), the usage chunk, or an
 * error. */
char *api_stream_first(const serve_server *srv, const serve_job *j);
char *api_stream_delta(const serve_server *srv, const serve_job *j, const char *text, size_t n);
char *api_stream_final(const serve_server *srv, const serve_job *j);
char *api_stream_usage(const serve_server *srv, const serve_job *j);
char *api_stream_error(const serve_job *j);
/* GET /v1/models, GET /health, POST /tokenize, POST /detokenize. */
api_reply api_models(const serve_server *srv);
api_reply api_health(const serve_server *srv);
api_reply api_tokenize(const serve_server *srv, const char *body, size_t n);
api_reply api_detokenize(const serve_server *srv, const char *body, size_t n);

/* ---- http.c ---- */
typedef struct serve_http serve_http;
/* Listens on host:port (0: any free port; *port gets the one bound). NULL with a message. */
serve_http *http_start(serve_server *srv, const char *host, int *port, char *msg, size_t cap);
void http_stop(serve_http *h);

#endif
