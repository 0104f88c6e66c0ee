/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_CONN_H_
#define UCT_HIPOWER_CONN_H_

#include "hipower_ep_def.h"

/* The control words the peer reads (bitmaps) and writes (state, grant,
 * run request words), registered for this endpoint */
ucs_status_t uct_hipower_conn_reg_ctrl(uct_hipower_ep_t *ep);

/* What the peer may access: read bitmaps, write words, write slots */
void uct_hipower_conn_dereg_peer_access(uct_hipower_ep_t *ep);

#endif
