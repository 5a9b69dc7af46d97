/* chat.h — chat.c's internals that tests look at (tests/test_chat.c). The contract is the
 * "conversations" section of lean.h. */
#ifndef LEAN_CHAT_H
#define LEAN_CHAT_H

#include "core/common.h"

/* The next-token logits after the last resident id (n_vocab floats), as the session's
 * lean_ctx computes them; NULL before the first prefill, and during a turn once a drawn id
 * has entered the cache. Between turns, logits a reply left on the backend (the GPU) are
 * computed again by decoding the last resident id anew (the same cache row). Valid until the
 * next step. */
const float *chat_session_logits(lean_chat_session *s);

#endif
