/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 *
 * The device's asynchronous events (ibv_get_async_event()), read by UCX's
 * async thread into a small ring that each interface takes them from in
 * its own progress (hipower_async.c handles them). It knows the device
 * context, not the memory domain that holds it (hipower_md.h embeds one
 * uct_hipower_md_async_t), so that the two do not name each other.
 */
#ifndef UCT_HIPOWER_MD_ASYNC_H_
#define UCT_HIPOWER_MD_ASYNC_H_

#include <ucs/sys/compiler_def.h>
#include <ucs/type/spinlock.h>
#include <ucs/type/status.h>
#include <infiniband/verbs.h>
#include <stdint.h>


/* Device events kept for the interfaces to handle (hipower_async.c) */
#define UCT_HIPOWER_ASYNC_RING   64

/* One asynchronous event of the device, as ibv_get_async_event() gave it */
typedef struct uct_hipower_async_event {
    enum ibv_event_type      type;
    uint32_t                 qp_num;       /* QP events */
    void                     *cq;          /* CQ events */
    uint8_t                  port;         /* Port events */
} uct_hipower_async_event_t;


/* A device's events, read by UCX's async thread, handled by each interface
 * in its progress (it owns its endpoints): the last UCT_HIPOWER_ASYNC_RING
 * of them, numbered by seq. Written by hipower_md_async.c alone. */
typedef struct uct_hipower_md_async {
    struct ibv_context       *context;     /* Whose events */
    const char               *name;        /* The device, for messages */
    int                      registered;   /* Handler installed */
    ucs_spinlock_t           lock;
    uint64_t                 seq;          /* Events read so far */
    uct_hipower_async_event_t ring[UCT_HIPOWER_ASYNC_RING];
} uct_hipower_md_async_t;


/* Starts reading @a context's asynchronous events in UCX's async thread
 * (md open); @a name, the device's, must outlive @a async */
ucs_status_t uct_hipower_md_async_init(uct_hipower_md_async_t *async,
                                       struct ibv_context *context,
                                       const char *name);

/* Stops (md close), waiting for a handler that runs */
void uct_hipower_md_async_cleanup(uct_hipower_md_async_t *async);

/* How many events were read so far: an interface whose count differs has
 * events to take (read in progress without the lock) */
static UCS_F_ALWAYS_INLINE uint64_t
uct_hipower_md_async_seq(const uct_hipower_md_async_t *async)
{
    return *(const volatile uint64_t*)&async->seq;
}

/**
 * Copies the events read since @a *seq_p (at most UCT_HIPOWER_ASYNC_RING,
 * the newest; @a *lost_p says how many older ones were overwritten) to
 * @a events and moves @a *seq_p past them. Returns how many it copied.
 */
unsigned uct_hipower_md_async_take(uct_hipower_md_async_t *async,
                                   uint64_t *seq_p,
                                   uct_hipower_async_event_t *events,
                                   uint64_t *lost_p);

/* The name of a device event, for messages */
const char *uct_hipower_md_event_name(enum ibv_event_type type);

#endif
