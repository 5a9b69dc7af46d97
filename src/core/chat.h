/* chat.h — chat.c's internals that tests look at (tests/test_chat.c). The contract is the
 * "conversations" section of lean.h. */
#ifndef LEAN_CHAT_H
#define LEAN_CHAT_H

#include "common.h"

/* The next-token logits after the last resident id (n_vocab floats), as the session's
 * lean_ctx computed them; NULL before the first prefill. Valid until the next step. */
const float *chat_session_logits(const lean_chat_session *s);

#endif
