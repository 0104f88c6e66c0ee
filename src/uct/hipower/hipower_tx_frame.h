/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_TX_FRAME_H_
#define UCT_HIPOWER_TX_FRAME_H_

#include "hipower_post.h"

/*
 * Frames into the peer's slots (hipower_tx_frame.c; the inline body is
 * hipower_tx_frame_impl.h)
 */

/* The frame kinds of a filled slot (uct_hipower_ep_send_msg()) */
#define UCT_HIPOWER_FILL_FIRST   2
#define UCT_HIPOWER_FILL_APPEND  1

/* Takes the next peer slot and posts a frame of @a length bytes at
 * @a data in @a op's buffer, the trailer right after them in the same
 * buffer; the caller checked the room (uct_hipower_ep_tx_room()). @a op is
 * retired with the frame. */
ucs_status_t uct_hipower_ep_send_frame(uct_hipower_ep_t *ep, void *data,
                                       uint32_t length, uint8_t am_id,
                                       uct_hipower_tx_op_t *op);

/* Posts the first batch of a filled slot, @a size bytes at @a data in
 * @a op's buffer (records and footer, room for the trailer after them), as
 * the frame of the peer's next slot, its trailer counting one batch; the
 * caller checked the slot and the room */
ucs_status_t uct_hipower_ep_send_fill_first(uct_hipower_ep_t *ep, void *data,
                                            uint32_t size,
                                            uct_hipower_tx_op_t *op);

/* Posts a batch of @a size bytes at @a data in @a op's buffer (records and
 * footer, room for the trailer after them) into the peer's slot our
 * bundles fill, below its batches so far, and the slot's trailer after
 * it; the caller checked uct_hipower_ep_fill_takes() and the room for
 * three work requests */
ucs_status_t uct_hipower_ep_send_batch(uct_hipower_ep_t *ep, void *data,
                                       uint32_t size, uct_hipower_tx_op_t *op);

/* The no-message frame: the first of a run granted while we had nothing
 * to send */
ucs_status_t uct_hipower_ep_send_none(uct_hipower_ep_t *ep);

/* Push mode: writes the bitmap word of messages not yet announced */
ucs_status_t uct_hipower_ep_announce(uct_hipower_ep_t *ep);

#endif
