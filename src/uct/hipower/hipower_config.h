/*
 * Copyright (C) hipower contributors. See LICENSE for terms.
 */
#ifndef UCT_HIPOWER_CONFIG_H_
#define UCT_HIPOWER_CONFIG_H_

#include "hipower_iface_def.h"

/* UCX_HIPOWER_*: the interface's configuration table */
extern ucs_config_field_t uct_hipower_iface_config_table[];

/* Refuses a value out of its range, naming the device and the variable */
ucs_status_t uct_hipower_config_check(uct_hipower_iface_t *self,
                                      const uct_hipower_iface_config_t *config);

/* IB encoding of the local ACK timeout: 4.096us * 2^value */
uint8_t uct_hipower_config_ack_timeout(double seconds);

/* The receive slots' layout from SLOT_SIZE and UCT's am_alignment and
 * am_align_offset (checked as uct.h says); the alignment in *@a align_p */
ucs_status_t uct_hipower_config_layout(uct_hipower_iface_t *self,
                                       const uct_iface_params_t *params,
                                       size_t slot_size, size_t *align_p);

/* How many endpoints the arena could ever hold: a run of MIN_SLOTS each */
uint32_t uct_hipower_config_eps_possible(size_t budget, size_t stride,
                                         unsigned min_slots);

/* Warns where the device is told to place a write's packets out of order
 * and the notification mode relies on their order */
void uct_hipower_config_check_placement(uct_hipower_iface_t *iface,
                                        const uct_hipower_iface_config_t *config);

#endif
