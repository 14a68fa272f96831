// SPDX-License-Identifier: MIT
/*
 * CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as common/visible.c reads them,
 * over four made-up devices whose PCI order differs from the server's.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "common/visible.h"

static struct mps_wire_device devs[4];

/* Selects and compares with the expected server indices ("" for none). */
static void expect(const char *visible, const char *order, const char *want)
{
	uint8_t map[MPS_MAX_DEVICES];
	char got[64] = "";
	int n = mps_visible_select(visible, order, devs, 4, map);

	if (n < 0)
		snprintf(got, sizeof(got), "error");
	for (int i = 0; i < n; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d", i ? "," : "", map[i]);
	CHECK(!strcmp(got, want), "CUDA_VISIBLE_DEVICES=%s%s%s: got [%s], want [%s]", visible ? visible : "(unset)",
	      order ? " CUDA_DEVICE_ORDER=" : "", order ? order : "", got, want);
}

int main(void)
{
	static const char *pci[4] = { "00000000:3B:00.0", "00000000:1A:00.0", "00000000:DB:00.0", "00000000:5E:00.0" };

	for (int i = 0; i < 4; i++) {
		for (int b = 0; b < 16; b++)
			devs[i].uuid[b] = (uint8_t)(0x10 * i + b);
		devs[i].uuid[0] = (uint8_t)(0xa0 + i);
		strcpy(devs[i].pci_bus_id, pci[i]);
	}
	devs[3].uuid[0] = 0xa2;   /* devices 2 and 3 share a first byte: "GPU-a2" is ambiguous */

	expect(NULL, NULL, "0,1,2,3");
	expect("", NULL, "");
	expect("1", NULL, "1");
	expect("2,0", NULL, "2,0");
	expect(" 3 , 1 ", NULL, "3,1");
	expect("1abc,2", NULL, "1,2");          /* read as strtoul reads it */
	expect("0,-1,2", NULL, "0");            /* the list ends at the first bad entry */
	expect("-1", NULL, "");
	expect("0,7,1", NULL, "0");             /* past the last device */
	expect("1,x,2", NULL, "1");
	expect("0,1,0", NULL, "error");         /* named twice */
	expect("3,2,1,0", NULL, "3,2,1,0");
	expect("1,", NULL, "1");
	expect("GPU-a1", NULL, "1");
	expect("GPU-A1111", NULL, "1");         /* case does not matter */
	expect("GPU-a0010203-0405-0607-0809-0a0b0c0d0e0f", NULL, "0");
	expect("GPU-a2", NULL, "");             /* ambiguous */
	expect("GPU-a3", NULL, "");             /* no such device */
	expect("GPU-a1,GPU-a0", NULL, "1,0");
	expect("GPU-a1,0", NULL, "1");          /* UUIDs, then an ordinal: the list ends */
	expect("0,GPU-a1", NULL, "0");
	expect("MIG-a1", NULL, "");
	expect("GPU-a1,GPU-a1", NULL, "error");
	/* By PCI bus id: 1A (1), 3B (0), 5E (3), DB (2). */
	expect(NULL, "PCI_BUS_ID", "1,0,3,2");
	expect("0", "PCI_BUS_ID", "1");
	expect("2,1", "PCI_BUS_ID", "3,0");
	expect("0", "FASTEST_FIRST", "0");
	expect("GPU-a2212", "PCI_BUS_ID", "2");
	printf("test_visible: %s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
