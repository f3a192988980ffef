/*
 * fuzz_npy.c: the runtime's .npy header parser and checker on any bytes
 * (rt_npy_parse, rt_npy_check), against a 2-D f32 tensor and a scalar.
 * Built by `make fuzz-npy` (clang, libFuzzer, ASan, UBSan) with the runtime.
 */
#include <string.h>

#include "rt.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static const TrtTensor t[2] = {
		{"A", TRT_INPUT, TRT_F32, 2, {6, 5}, NULL},
		{"s", TRT_INPUT, TRT_F64, 0, {0}, NULL},
	};
	NpyHeader h;
	char why[512];

	for (int i = 0; i < 2; i++)
		if (rt_npy_parse(data, size, &h, why, sizeof why))
			rt_npy_check(&h, &t[i], (int64_t)size, why, sizeof why);
	return 0;
}
