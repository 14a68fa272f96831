// SPDX-License-Identifier: MIT
/*
 * CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER as common/visible.c reads them,
 * over four made-up devices whose PCI order differs from the server's, and
 * two virtual devices (slices of device 1, "vd-a" and "vd-b"), which only
 * their UUIDs name; and the virtual devices' UUIDs themselves.
 */
#include <stdio.h>
#include <string.h>

#include "../check.h"
#include "common/visible.h"

static struct mps_wire_device devs[6];

/* The same within a container's devices (NVIDIA_VISIBLE_DEVICES). */
static void expect_in(const char *container, const char *visible, const char *want)
{
	uint8_t map[MPS_MAX_DEVICES];
	char got[64] = "";
	int n = mps_visible_select_in(container, visible, NULL, devs, 4, 2, map);

	if (n < 0)
		snprintf(got, sizeof(got), "error");
	for (int i = 0; i < n; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d", i ? "," : "", map[i]);
	CHECK(!strcmp(got, want), "NVIDIA_VISIBLE_DEVICES=%s CUDA_VISIBLE_DEVICES=%s: got [%s], want [%s]",
	      container ? container : "(unset)", visible ? visible : "(unset)", got, want);
}

/* The same among the devices a CDI spec gave (OPENMPS_CDI_DEVICE_*). */
static void expect_given(const char *given, const char *visible, const char *want)
{
	uint8_t map[MPS_MAX_DEVICES];
	char got[64] = "";
	int n = mps_visible_select_given(given, visible, NULL, devs, 4, 2, map);

	if (n < 0)
		snprintf(got, sizeof(got), "error");
	for (int i = 0; i < n; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d", i ? "," : "", map[i]);
	CHECK(!strcmp(got, want), "given %s, CUDA_VISIBLE_DEVICES=%s: got [%s], want [%s]", given,
	      visible ? visible : "(unset)", got, want);
}

/* Selects and compares with the expected server indices ("" for none). */
static void expect(const char *visible, const char *order, const char *want)
{
	uint8_t map[MPS_MAX_DEVICES];
	char got[64] = "";
	int n = mps_visible_select(visible, order, devs, 4, 2, map);

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
	for (int v = 0; v < 2; v++) {
		devs[4 + v] = devs[1];
		devs[4 + v].base = 2;
		mps_vdev_uuid(devs[1].uuid, v ? "vd-b" : "vd-a", devs[4 + v].uuid);
	}

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
	/* Virtual devices: by UUID only, never with their GPU or each other. */
	{
		char a[48], b[48], p1[128];
		uint8_t back[16];

		CHECK(memcmp(devs[4].uuid, devs[1].uuid, 16) && memcmp(devs[4].uuid, devs[5].uuid, 16) &&
			      (devs[4].uuid[6] >> 4) == 8, "virtual UUIDs differ from the GPU's and each other's");
		snprintf(a, sizeof(a), "GPU-");
		mps_uuid_text(a + 4, devs[4].uuid);
		snprintf(b, sizeof(b), "GPU-");
		mps_uuid_text(b + 4, devs[5].uuid);
		CHECK(mps_uuid_parse(a, back) == 0 && !memcmp(back, devs[4].uuid, 16), "UUID text round trip");
		CHECK(mps_uuid_parse("GPU-12", back) < 0 && mps_uuid_parse("GPU-zz", back) < 0, "bad UUID text refused");
		expect(NULL, NULL, "0,1,2,3");   /* not among the defaults */
		expect(a, NULL, "4");
		expect(b, NULL, "5");
		snprintf(p1, sizeof(p1), "%s,GPU-a0", a);
		expect(p1, NULL, "4,0");
		snprintf(p1, sizeof(p1), "%s,%s", a, b);
		expect(p1, NULL, "error");      /* two slices of one GPU */
		snprintf(p1, sizeof(p1), "GPU-a1,%s", a);
		expect(p1, NULL, "error");      /* a slice and its GPU */
		expect("4", NULL, "");          /* ordinals count GPUs only */

		/* A container given some GPUs: NVML indexes are PCI order
		 * (1A 3B 5E DB: 1, 0, 3, 2), the devices keep the server's
		 * order, CUDA_VISIBLE_DEVICES counts among them. */
		expect_in(NULL, NULL, "0,1,2,3");
		expect_in("all", NULL, "0,1,2,3");
		expect_in("none", NULL, "");
		expect_in("void", NULL, "");
		expect_in("", NULL, "");
		expect_in("0", NULL, "1");
		expect_in("2,0", NULL, "1,3");         /* NVML 2 is 5E (3), 0 is 1A (1): server order */
		expect_in("3", "0", "2");
		expect_in("2,0", "1", "3");
		expect_in("2,0", "1,0", "3,1");
		expect_in("2,0", "2", "");             /* past the container's devices */
		expect_in("GPU-a0,GPU-a1", NULL, "0,1");
		expect_in("GPU-a3", NULL, "");          /* names nothing: the container would not start */
		expect_in("0,9", NULL, "");
		expect_in("0,0", NULL, "1");            /* named twice: one device node, one device */
		expect_in("0,", NULL, "1");
		expect_in("0,GPU-a0", NULL, "0,1");     /* indexes and UUIDs may mix */
		expect_in(" 3 , 0 ", NULL, "1,2");
		expect_in("1abc", NULL, "");            /* not an index: refused, not read as 1 */
		expect_in("0:1", NULL, "");             /* a MIG instance is not a GPU */
		expect_in("MIG-a1", NULL, "");
		expect_in("0,,1", NULL, "");
		expect_in("0", a, "4");                 /* NVML 0 is device 1: its slices stay */
		expect_in("1", a, "");                  /* a slice of a GPU the container lacks */
		snprintf(p1, sizeof(p1), "%s,0", a);
		expect_in("0,2", p1, "4");              /* a slice, then an ordinal: the list ends */

		/* Devices given by CDI: whole UUIDs only, the GPUs then the
		 * slices in the server's order; CUDA_VISIBLE_DEVICES counts
		 * among them and names a given GPU's slices by UUID. */
		{
			char g0[48] = "GPU-", g1[48] = "GPU-", g2[48] = "GPU-", two[160];

			mps_uuid_text(g0 + 4, devs[0].uuid);
			mps_uuid_text(g1 + 4, devs[1].uuid);
			mps_uuid_text(g2 + 4, devs[2].uuid);
			expect_given(a, NULL, "4");
			expect_given(b, NULL, "5");
			expect_given(a, "0", "4");
			expect_given(a, "1", "");
			snprintf(two, sizeof(two), "%s,%s", g2, g0);
			expect_given(two, NULL, "0,2");         /* the server's order */
			expect_given(two, "1", "2");
			expect_given(two, a, "");               /* a slice of a GPU not given */
			snprintf(two, sizeof(two), "%s,%s", a, g2);
			expect_given(two, NULL, "2,4");         /* GPUs first, then slices */
			expect_given(two, "1", "4");
			snprintf(two, sizeof(two), "%s,%s", g0, g0);
			expect_given(two, NULL, "0");           /* one device named by two CDI names */
			snprintf(two, sizeof(two), "%s", g1);
			expect_given(two, a, "4");              /* a given GPU's slice, by its UUID */
			expect_given(two, NULL, "1");
			snprintf(two, sizeof(two), "%s,%s", a, b);
			expect_given(two, NULL, "error");       /* two slices of one GPU */
			expect_given(two, "1", "5");            /* ... unless one is chosen */
			snprintf(two, sizeof(two), "%s,%s", g1, a);
			expect_given(two, NULL, "error");       /* a slice and its GPU */
			expect_given(two, "0", "1");
			expect_given("GPU-a1", NULL, "");       /* a prefix is not a whole UUID */
			expect_given("GPU-ffffffff-ffff-ffff-ffff-ffffffffffff", NULL, "");
			snprintf(two, sizeof(two), "%s,junk", g0);
			expect_given(two, NULL, "");            /* a stale spec: none */
			expect_given("", NULL, "");
		}
	}
	return check_finish("test_visible");
}
