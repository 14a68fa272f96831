// SPDX-License-Identifier: MIT
//
// The real driver's own functions that some private tables are served with
// (exports/driver.c), as indexes into mps__drv_slots[]. Shared with the
// assembly forwarders (exports/driver_fwd.S), so only #defines here.
#ifndef MPS_CLIENT_EXPORTS_DRIVER_H
#define MPS_CLIENT_EXPORTS_DRIVER_H

#define MPS_DRV_1734DC26_4   0   /* cuBLASLt: two per-TPC maps */
#define MPS_DRV_1734DC26_13  1   /* cuBLASLt: frees them */
#define MPS_DRV_69A28E9F_19  2   /* NVML */
#define MPS_DRV_69A28E9F_21  3
#define MPS_DRV_69A28E9F_24  4
#define MPS_DRV_69A28E9F_25  5
#define MPS_DRV_DA9151D3_1   6   /* NVRTC, nvJitLink: compiler outputs */
#define MPS_DRV_DA9151D3_2   7
#define MPS_DRV_DA9151D3_3   8
#define MPS_DRV_DA9151D3_4   9
#define MPS_DRV_DA9151D3_6   10
#define MPS_DRV_SLOTS        11

#endif
