/* job.c — a job's life: made by api.c for a request, shared by its connection (http.c) and
 * the engine (engine.c), freed when the last of them lets go. Apart from engine.c so that
 * api.c and its fuzz target (tests/fuzz_serve.c) need no engine. */
#include "serve.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int text_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *b = realloc(*buf, c);
        if (!b) return -1;
        *buf = b, *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return 0;
}

serve_job *job_new(void) {
    serve_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    if (pthread_cond_init(&j->cv, NULL) != 0) return free(j), NULL;
    j->fd = -1;
    j->refs = 1;
    j->created_s = (int64_t)time(NULL);
    return j;
}

void job_unref_locked(serve_job *j) {
    if (!j || --j->refs > 0) return;
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    lean_grammar_free(j->grammar);
    free(j->allow);
    free(j->bias);
    free(j->prompt);
    free(j->text);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void job_cancel(serve_server *srv, serve_job *j) {
    pthread_mutex_lock(&srv->mu);
    if (!j->done) j->cancelled = 1;
    pthread_cond_signal(&srv->wake);
    pthread_mutex_unlock(&srv->mu);
}
