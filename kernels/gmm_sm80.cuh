/* Portable grouped GEMM (sm_80 and later): mma.sync m16n8k16, 256 threads,
 * a 128 x 128 tile, 32 channels per step, global loads for step k+1 in flight
 * while step k computes.  Any shape and alignment: loads fall back from
 * 16-byte vectors to bounds-checked scalars.  fp8 e4m3 is widened exactly to
 * f16 in shared memory, and the block scales are applied every 128 channels
 * as on Hopper. */
#pragma once

namespace cg {

constexpr int SM80_THREADS = 256;

__device__ __forceinline__ uint32_t fp8x2_to_f16x2(uint32_t two)
{
	const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
	return static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;
}

/* 8 consecutive elements of a row as 16-bit MMA operands (bf16 as is, e4m3
 * widened to f16); zeros where !ok or past `avail` elements. */
template <bool FP8>
__device__ __forceinline__ uint4 load8(const void *base, size_t idx, bool ok, int avail, bool vec)
{
	uint32_t w[4] = {0, 0, 0, 0};
	if (ok && avail > 0) {
		if (FP8) {
			const uint8_t *p = static_cast<const uint8_t *>(base) + idx;
			uint32_t lo = 0, hi = 0;
			if (vec && avail >= 8) {
				const uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
				lo = v.x;
				hi = v.y;
			} else {
#pragma unroll
				for (int i = 0; i < 4; ++i) {
					lo |= (i < avail ? static_cast<uint32_t>(p[i]) : 0u) << (8 * i);
					hi |= (i + 4 < avail ? static_cast<uint32_t>(p[i + 4]) : 0u) << (8 * i);
				}
			}
			w[0] = fp8x2_to_f16x2(lo & 0xFFFF);
			w[1] = fp8x2_to_f16x2(lo >> 16);
			w[2] = fp8x2_to_f16x2(hi & 0xFFFF);
			w[3] = fp8x2_to_f16x2(hi >> 16);
		} else {
			const uint16_t *p = static_cast<const uint16_t *>(base) + idx;
			if (vec && avail >= 8)
				return __ldg(reinterpret_cast<const uint4 *>(p));
#pragma unroll
			for (int i = 0; i < 4; ++i)
				w[i] = (2 * i < avail ? static_cast<uint32_t>(p[2 * i]) : 0u) |
				       (2 * i + 1 < avail ? static_cast<uint32_t>(p[2 * i + 1]) : 0u) << 16;
		}
	}
	return make_uint4(w[0], w[1], w[2], w[3]);
}

/* addr: a shared-memory address */
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
		     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
		     : "r"(addr)
		     : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t *p)
{
	ldmatrix_x4(r, static_cast<uint32_t>(__cvta_generic_to_shared(p)));
}

template <bool F16>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
	if (F16)
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
			     "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
			     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
	else
		asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
			     "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
			     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
			     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Warps 2 (m) x 4 (n), 64 x 32 each: 4 m16 x 4 n8 fragments. */
template <int BM, int BN, int BK, bool FP8, bool NK>
__device__ __forceinline__ void sm80_gemm(const cg_gmm_args &a)
{
	static_assert(BM == 128 && BN == 128 && BK == 32, "thread mapping below");
	constexpr int LDS = CG_GMM_SM80_LDS(BK);
	constexpr int ESZ = FP8 ? 1 : 2;
	uint16_t *as = reinterpret_cast<uint16_t *>(cg_smem);
	uint16_t *bs = as + BM * LDS;
	int *tab = reinterpret_cast<int *>(bs + BN * LDS);
	if (cg_gmm_form_has_tables(a.form))
		build_tables<BM, SM80_THREADS>(a, tab);
	const Sched<BM, BN> sc(a, tab);
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp >> 2, wn = warp & 3;
	const bool vec_a = a.flags & CG_GMM_ARG_VEC_A, vec_b = a.flags & CG_GMM_ARG_VEC_B;
	const int total = sc.total();

	for (int t = blockIdx.x; t < total; t += gridDim.x) {
		Tile tl;
		if (!sc.tile(t, tl))
			continue;
		const unsigned char *bg =
		    static_cast<const unsigned char *>(a.b) + static_cast<size_t>(tl.g) * a.n * a.k * ESZ;
		float acc[4][4][4], tmp[4][4][4];
#pragma unroll
		for (int i = 0; i < 4; ++i)
#pragma unroll
			for (int j = 0; j < 4; ++j)
#pragma unroll
				for (int e = 0; e < 4; ++e)
					acc[i][j][e] = tmp[i][j][e] = 0.f;

		uint4 ra[2], rb[2];
		/* A and NK-B: chunk c = row c/4, channels 8*(c%4); KN-B: channel c/16,
		 * columns 8*(c%16) */
		auto load = [&](int k0) {
#pragma unroll
			for (int i = 0; i < 2; ++i) {
				const int c = tid + i * SM80_THREADS;
				const int r = c >> 2, kc = k0 + (c & 3) * 8;
				ra[i] = load8<FP8>(a.a, static_cast<size_t>(tl.m0 + r) * a.k + kc, r < tl.rows, a.k - kc,
						   vec_a);
				if (NK) {
					rb[i] = load8<FP8>(bg, static_cast<size_t>(tl.n0 + r) * a.k + kc,
							   tl.n0 + r < a.n, a.k - kc, vec_b);
				} else {
					const int kr = k0 + (c >> 4), nc = tl.n0 + (c & 15) * 8;
					rb[i] = load8<FP8>(bg, static_cast<size_t>(kr) * a.n + nc, kr < a.k, a.n - nc,
							   vec_b);
				}
			}
		};
		load(0);
		for (int k0 = 0; k0 < a.k; k0 += BK) {
			__syncthreads();
#pragma unroll
			for (int i = 0; i < 2; ++i) {
				const int c = tid + i * SM80_THREADS;
				*reinterpret_cast<uint4 *>(as + (c >> 2) * LDS + (c & 3) * 8) = ra[i];
				if (NK) {
					*reinterpret_cast<uint4 *>(bs + (c >> 2) * LDS + (c & 3) * 8) = rb[i];
				} else {
					const uint32_t w[4] = {rb[i].x, rb[i].y, rb[i].z, rb[i].w};
					uint16_t *dst = bs + (c & 15) * 8 * LDS + (c >> 4);
#pragma unroll
					for (int e = 0; e < 8; ++e)
						dst[e * LDS] = static_cast<uint16_t>(w[e >> 1] >> (16 * (e & 1)));
				}
			}
			__syncthreads();
			if (k0 + BK < a.k)
				load(k0 + BK);
#pragma unroll
			for (int kk = 0; kk < BK; kk += 16) {
				uint32_t af[4][4], bf[4][2];
#pragma unroll
				for (int mi = 0; mi < 4; ++mi)
					ldmatrix_x4(af[mi], as + (wm * 64 + mi * 16 + (lane & 15)) * LDS + kk + (lane >> 4) * 8);
#pragma unroll
				for (int p = 0; p < 2; ++p) {
					uint32_t r[4];
					ldmatrix_x4(r, bs + (wn * 32 + p * 16 + (lane & 7) + (lane >> 4) * 8) * LDS + kk +
							   ((lane >> 3) & 1) * 8);
					bf[2 * p][0] = r[0];
					bf[2 * p][1] = r[1];
					bf[2 * p + 1][0] = r[2];
					bf[2 * p + 1][1] = r[3];
				}
#pragma unroll
				for (int mi = 0; mi < 4; ++mi)
#pragma unroll
					for (int nj = 0; nj < 4; ++nj)
						mma16816<FP8>(FP8 ? tmp[mi][nj] : acc[mi][nj], af[mi], bf[nj][0], bf[nj][1]);
			}
			if (FP8 && ((k0 + BK) % 128 == 0 || k0 + BK >= a.k)) {
				const int kb = k0 / 128;
				const int nbn = (a.n + 127) / 128, kbn = (a.k + 127) / 128;
				const float sb = __ldg(a.sfb + (static_cast<size_t>(tl.g) * nbn + tl.n0 / 128) * kbn + kb);
#pragma unroll
				for (int mi = 0; mi < 4; ++mi) {
					float s[2];
#pragma unroll
					for (int h = 0; h < 2; ++h) {
						/* rows past the tile's last read its scale (see sm90) */
						const int r = tl.m0 + min(wm * 64 + mi * 16 + (lane >> 2) + 8 * h, tl.rows - 1);
						s[h] = __ldg(a.sfa + tl.g * a.sfa_sg + r * a.sfa_sm + kb * a.sfa_sk) * sb;
					}
#pragma unroll
					for (int nj = 0; nj < 4; ++nj)
#pragma unroll
						for (int e = 0; e < 4; ++e) {
							acc[mi][nj][e] = fmaf(tmp[mi][nj][e], s[e >> 1], acc[mi][nj][e]);
							tmp[mi][nj][e] = 0.f;
						}
				}
			}
		}

		__nv_bfloat16 *d = static_cast<__nv_bfloat16 *>(a.d);
		const bool pair = a.flags & CG_GMM_ARG_D_PAIR;
#pragma unroll
		for (int mi = 0; mi < 4; ++mi)
#pragma unroll
			for (int h = 0; h < 2; ++h) {
				const int r = wm * 64 + mi * 16 + (lane >> 2) + 8 * h;
				if (!sc.row_ok(tl, r))
					continue;
				__nv_bfloat16 *rp = d + static_cast<size_t>(tl.m0 + r) * a.n;
#pragma unroll
				for (int nj = 0; nj < 4; ++nj) {
					const int col = tl.n0 + wn * 32 + nj * 8 + 2 * (lane & 3);
					const float v0 = acc[mi][nj][2 * h], v1 = acc[mi][nj][2 * h + 1];
					if (pair && col + 1 < a.n) {
						*reinterpret_cast<uint32_t *>(rp + col) = pack_bf16(v0, v1);
					} else {
						if (col < a.n)
							rp[col] = __float2bfloat16_rn(v0);
						if (col + 1 < a.n)
							rp[col + 1] = __float2bfloat16_rn(v1);
					}
				}
			}
	}
}

} // namespace cg
