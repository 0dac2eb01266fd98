/* Hopper (sm_90a) grouped GEMM: TMA loads into a ring of shared-memory
 * stages guarded by mbarriers, wgmma from shared memory, one producer
 * warpgroup (warp 0: TMA; warp 1: fp8 scales where TMA cannot load sfa)
 * and BM/64 consumer warpgroups, a persistent grid walking the (group,
 * m-tile, n-tile) work of gmm_sched.cuh.
 *
 * Tile rows are 128 bytes (64 bf16 or 128 fp8 channels) stored with the
 * 128-byte swizzle, so one wgmma descriptor shape serves every operand:
 * 8-row core groups 1024 bytes apart.  B in [G, K, N] is loaded as BN/64
 * boxes of 64 columns x BK rows and read N-major (wgmma's transpose bit).
 * Measurements behind the choices here: kernels/NOTES.md.
 *
 * This file is the kernel; its parts: gmm_sm90_ptx.cuh (PTX primitives),
 * gmm_sm90_pipeline.cuh (the ring of stages), gmm_sm90_epilogue.cuh (the
 * stores of D). */
#pragma once

#include "gmm_sm90_ptx.cuh"
#include "gmm_sm90_pipeline.cuh"
#include "gmm_sm90_epilogue.cuh"

namespace cg {

template <int BM, int BN, int BK, int STAGES, bool FP8, bool NK>
struct Sm90 {
	static constexpr int NC = CG_GMM_SM90_CONSUMERS(BM, BN);
	static constexpr bool ROW_SPLIT = BM > 64; /* else the consumers split the columns */
	static constexpr int WN = ROW_SPLIT ? BN : BN / NC; /* columns per consumer warpgroup */
	static constexpr int THREADS = (NC + 1) * 128;
	static constexpr int ESZ = FP8 ? 1 : 2;
	static constexpr int A_BYTES = BM * BK * ESZ;
	static constexpr int A_BOX = CG_GMM_A_BOX_ROWS; /* rows of a short tile's A boxes */
	static constexpr int B_BYTES = BN * BK * ESZ;
	static constexpr int ACC = WN / 2; /* fp32 per thread: 64 x WN per warpgroup */
	static constexpr int NSB = BN / 128; /* fp8: 128-column scale blocks per tile */
	static constexpr int NH = WN / 128;  /* ... per warpgroup */
	/* fp8: columns of one wgmma pass into partial sums; 256 columns a
	 * warpgroup take four passes of 64, pipelined (the consumer loop) */
	static constexpr int PW = WN == 256 ? 64 : 128;
	/* fp8: each stage's scales (gmm_kernels.h); sfa from float SFA_AT on,
	 * W floats per row: 4 where row-major sfa comes by TMA (the 4 k blocks
	 * holding the stage's), else 1 (MN-major sfa by TMA, or the scale warp's
	 * copies) */
	static constexpr int SLOT = FP8 ? CG_GMM_SM90_SLOT(BM) : 0;
	static constexpr int SFA_AT = CG_GMM_SM90_SFA_AT;
	static_assert(BK * ESZ == 128, "tile rows are one 128-byte swizzle span");
	static_assert(BM % A_BOX == 0 && A_BOX % 8 == 0, "A's boxes tile its stage in whole swizzle atoms");
	static_assert(!FP8 || (NK && BK == 128), "fp8: K-major B, one scale block per stage");
	static_assert(WN == 128 || WN == 256, "wgmma n");
};

/* D rows of one consumer thread: row and row + 8 of the tile; columns
 * 8j + 2q, +1 for j < ACC/4 (q = lane % 4), accumulator 4j + 2h + e for
 * row + 8h.  Lane pairs swap halves so that each stores 4 consecutive columns

/* 1024-byte aligned, as the 128-byte swizzle of the tiles needs (the
 * kernel checks it): no slack to align it by */
extern __shared__ __align__(1024) unsigned char cg_smem[];

template <int BM, int BN, int BK, int STAGES, bool FP8, bool NK, int EPI>
__device__ __forceinline__ void sm90_gemm(const CUtensorMap &tma, const CUtensorMap &tmr, const CUtensorMap &tmb,
					  const CUtensorMap &tmd, const CUtensorMap &tms, const cg_gmm_args &a)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
	using C = Sm90<BM, BN, BK, STAGES, FP8, NK>;
	constexpr bool EPI_TMA = EPI == CG_GMM_EPI_TMA, KSPLIT = EPI == CG_GMM_EPI_KSPLIT;
	constexpr bool RELAY = FP8 && BM == 128 && !KSPLIT; /* relay() */
	static_assert(!RELAY || CG_RELAY_BAR0 + STAGES * C::NC <= 16, "16 named barriers");
	static_assert(!KSPLIT || C::NC == 1, "a k-split tile is one consumer warpgroup's");
	/* offsets from cg_smem, never through an integer: the compiler then
	 * knows every pointer below is shared memory (the fp8 scales and the
	 * group tables are read with LDS, not generic loads) */
	unsigned char *smem = cg_smem;
	if (smem_u32(cg_smem) & 1023u)
		__trap();
	unsigned char *sa = smem;
	unsigned char *sb = smem + STAGES * C::A_BYTES;
	/* the epilogue's: TMA, the D tile, 64 x WN bf16 per consumer
	 * warpgroup; KSPLIT, the other CTAs' sums and their mbarrier */
	unsigned char *sd = smem + STAGES * (C::A_BYTES + C::B_BYTES);
	float *scales = reinterpret_cast<float *>(sd + cg_gmm_sm90_epi_bytes(EPI, BM, BN));
	uint64_t *recv = reinterpret_cast<uint64_t *>(sd + CG_GMM_KSPLIT_BYTES(BM, BN) - 128);
	uint64_t *full = reinterpret_cast<uint64_t *>(scales + STAGES * C::SLOT);
	uint64_t *empty = full + STAGES;
	const Handoff ho(empty + STAGES);
	int *tab = reinterpret_cast<int *>(empty + STAGES + CG_GMM_SM90_HANDOFF_BYTES / 8);
	/* fp8: sfa by TMA with A and B (the host's tensor map, where the layout
	 * allows), else by the scale warp: measured, the scale warp's per-stage
	 * work cost 3-9% of fp8 prefill time */
	const bool sfa_tma = FP8 && (a.flags & CG_GMM_ARG_SFA_TMA);
	/* sfa floats per row in a stage's slot: a row-major box's, else 1 */
	const int sfa_w = FP8 && (a.flags & CG_GMM_ARG_SFA_ROWS) ? CG_GMM_SFA_ROW_BOX : 1;
	/* broadcast, so that the compiler knows them warp-uniform */
	const uint32_t ranks = KSPLIT ? __shfl_sync(~0u, cluster_size(), 0) : 1;
	const uint32_t rank = KSPLIT ? __shfl_sync(~0u, cluster_rank(), 0) : 0;

	/* a tail launched behind this kernel (grouped_mm.c, launch) may take
	 * each multiprocessor as this kernel's block there ends.  Only then:
	 * whatever else the stream runs next with programmatic serialization
	 * waits for the whole grid, as it would behind a kernel that never
	 * triggers, even if it never executes griddepcontrol.wait. */
	if constexpr (BM == CG_GMM_TAIL_BM)
		if (a.flags & CG_GMM_ARG_TAIL_NEXT)
			asm volatile("griddepcontrol.launch_dependents;");
	if (cg_gmm_form_has_tables(a.form))
		build_tables<BM, C::THREADS>(a, tab);
	if (threadIdx.x == 0) {
		prefetch_tensormap(&tma);
		prefetch_tensormap(&tmr);
		prefetch_tensormap(&tmb);
		if (EPI_TMA && (a.flags & CG_GMM_ARG_D_TMA))
			prefetch_tensormap(&tmd);
		if (sfa_tma)
			prefetch_tensormap(&tms);
		for (int s = 0; s < STAGES; ++s) {
			/* the TMA thread's expect_tx; fp8: plus its sfb copies, or each
			 * lane of the scale warp */
			mbar_init(&full[s], FP8 ? (sfa_tma ? 2 : 33) : 1);
			mbar_init(&empty[s], C::NC * 4); /* one arrival per consumer warp */
		}
		for (int i = 0; i < 2; ++i) {
			mbar_init(&ho.full[i], 1);
			mbar_init(&ho.free[i], C::NC * 4);
		}
		if (KSPLIT && ranks > 1)
			mbar_init(recv, (ranks - 1) * 128); /* every consumer thread of the others */
		asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
	}
	__syncthreads();
	if (KSPLIT && ranks > 1)
		cluster_sync(); /* rank 0's mbarrier initialized before anyone arrives on it */

	/* KSPLIT: this CTA's k blocks [kb0, kb0 + k_iters) of its cluster's
	 * tile; a launch without clusters (ranks 1) computes whole tiles */
	const int k_all = (a.k + BK - 1) / BK;
	const int kb0 = KSPLIT ? static_cast<int>(rank) * k_all / static_cast<int>(ranks) : 0;
	const int k_iters = KSPLIT ? (static_cast<int>(rank) + 1) * k_all / static_cast<int>(ranks) - kb0 : k_all;
	/* broadcast from lane 0 so that the compiler knows it is warp-uniform:
	 * the consumers' wgmma descriptors then live in uniform registers
	 * instead of being moved there before every wgmma (measured: fp8
	 * 128 x 256 k-step 210 -> 186 instructions per warp, 1-3.5% faster) */
	const int wg = __shfl_sync(~0u, threadIdx.x / 128, 0);
	const int lane = threadIdx.x & 31;

	if (wg == 0) {
		/* this warpgroup at 40 registers and two at 232 use exactly the
		 * block's 384 x 168: the consumers' setmaxnreg.inc waits until the
		 * producer has freed what it takes, for ever if the producer keeps
		 * more (kernels/NOTES.md v28: 48 hung) */
		if (C::NC > 1)
			asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
		/* built after the register split: values live across setmaxnreg
		 * must fit the producer's 40 registers, else they spill */
		const Sched<BM, BN> sc(a, tab);
		const int warp = threadIdx.x >> 5;
		if (warp == 0 && lane == 0) {
			/* TMA: A and B tiles of each k-step */
			produce<STAGES, KSPLIT>(sc, ranks, k_iters, empty, &ho, [&](const Tile &tl, int kb, int stage) {
				kb += kb0;
				/* A: a full tile's in one box (tma; measured: 0.4-2.6% less
				 * fp8 prefill time than four boxes of 32 rows), a short
				 * tile's in boxes of A_BOX rows (tmr), only those holding
				 * its rows: a short group's tile (decode) leaves the rest of
				 * its A stage stale, computed on but never stored, instead
				 * of reading rows past the group through L2 once per column
				 * tile (masked decode is bound by L2 throughput) */
				const int a_boxes = (tl.rows + C::A_BOX - 1) / C::A_BOX;
#ifdef CG_GMM_X_HALF_B
				/* a measurement build's (journal v48): the fp8 128-row
				 * kernels load B for even m-tiles only, the odd ones
				 * computing on a stale stage (wrong results): the most B's
				 * multicast to pairs of m-tiles could save in L2 reads */
				const bool load_b = !(FP8 && BM == 128) || ((tl.m0 / BM) & 1) == 0;
#else
				constexpr bool load_b = true;
#endif
				mbar_expect_tx(&full[stage], a_boxes * C::A_BOX * 128 + (load_b ? C::B_BYTES : 0) +
								     (sfa_tma ? sfa_w * BM * 4 : 0));
				const int k0 = kb * BK;
				/* sfa [groups][k blocks][rows of a group] (MN-major) or
				 * [groups][rows of a group][k blocks] (row-major: the box of
				 * the 4 blocks holding kb); masked rows count from their
				 * group's first, the other forms' from A's */
				if (sfa_tma) {
					float *slot = scales + stage * C::SLOT;
					const int r = tl.m0 - tl.g * a.group_rows;
					const bool rows = sfa_w != 1;
					tma_load_3d(slot + C::SFA_AT, &tms, &full[stage],
						    rows ? kb & ~(CG_GMM_SFA_ROW_BOX - 1) : r, rows ? r : kb,
						    a.group_rows ? tl.g : 0);
#pragma unroll
					for (int j = 0; j < C::NSB; ++j)
						cp_async_4(slot + j, sfb_at(a, tl, j, kb));
					cp_async_arrive(&full[stage]);
				}
				if (tl.rows >= BM) {
					tma_load_2d(sa + stage * C::A_BYTES, &tma, &full[stage], k0, tl.m0);
				} else {
#pragma unroll
					for (int i = 0; i < BM / C::A_BOX; ++i)
						if (i < a_boxes)
							tma_load_2d(sa + stage * C::A_BYTES + i * C::A_BOX * 128, &tmr,
								    &full[stage], k0, tl.m0 + i * C::A_BOX);
				}
				if (NK) {
					if (load_b)
						tma_load_3d(sb + stage * C::B_BYTES, &tmb, &full[stage], k0, tl.n0, tl.g);
				} else {
#pragma unroll
					for (int j = 0; j < BN / 64; ++j)
						tma_load_3d(sb + stage * C::B_BYTES + j * 64 * BK * 2, &tmb, &full[stage],
							    tl.n0 + 64 * j, k0, tl.g);
				}
			});
		} else if (RELAY && warp == 2) { /* warp 1 may be the scale warp */
			relay<STAGES, C::NC>(sc, k_iters, full);
		} else if (FP8 && !sfa_tma && warp == 1) {
			produce<STAGES, KSPLIT>(sc, ranks, k_iters, empty, nullptr, [&](const Tile &tl, int kb, int stage) {
				kb += kb0;
				const float *sfa = a.sfa + tl.g * a.sfa_sg + tl.m0 * a.sfa_sm + kb * a.sfa_sk;
				float *slot = scales + stage * C::SLOT;
#pragma unroll
				for (int i = 0; i < BM / 32; ++i)
					cp_async_4(slot + C::SFA_AT + i * 32 + lane, sfa + min(i * 32 + lane, tl.rows - 1) * a.sfa_sm);
				if (lane < C::NSB)
					cp_async_4(slot + lane, sfb_at(a, tl, lane, kb));
				cp_async_arrive(&full[stage]);
			});
		}
		return;
	}

	if (C::NC > 1)
		asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
	const Sched<BM, BN> sc(a, tab);
	/* consumer warpgroup cw: tile rows [r0, r0 + 64), columns [c0, c0 + WN);
	 * smem rows of A and B (NK: one per column; KN: 64-column boxes of BK
	 * rows) are 128 bytes */
	const int cw = wg - 1;
	const int r0 = C::ROW_SPLIT ? cw * 64 : 0, c0 = C::ROW_SPLIT ? 0 : cw * C::WN;
	const int row = r0 + ((threadIdx.x >> 5) & 3) * 16 + (lane >> 2); /* this thread's tile row */
	const int sa_at = C::SFA_AT + row * sfa_w; /* fp8: its sfa in a stage's slot */
	const Desc a_desc(smem_u32(sa) + r0 * 128, 16, 1024);
	const Desc b_desc(smem_u32(sb) + c0 * 128, NK ? 16 : BK * 128, 1024);
	float acc[C::ACC];
	float part[2][FP8 ? C::PW / 2 : 1]; /* fp8: two sets of partial sums */
#pragma unroll
	for (int i = 0; i < (FP8 ? C::PW / 2 : 1); ++i)
		part[0][i] = part[1][i] = 0.f;
	uint32_t parity = 0;
	const bool epi_tma = EPI_TMA && (a.flags & CG_GMM_ARG_D_TMA);
	const bool leader = (threadIdx.x & 127) == 0;
	unsigned char *dbuf = sd + cw * 64 * C::WN * 2;
	Pending<C::WN / 64> pend{0, 0, 0};

	for (uint32_t i = 0;; ++i) {
		const Tile tl = ho.take(i, lane);
		if (tl.g == Handoff::END)
			break;
		/* whether this thread's two rows are written: their group ids,
		 * loaded now and compared after the k-loop (measured: compared
		 * here, the load's latency held up every tile's start; bf16
		 * prefill up to 1.7% slower, kernels/NOTES.md v45) */
		const int rg[2] = {sc.row_group(tl, row), sc.row_group(tl, row + 8)};
		/* fp8: a warpgroup whose 64 rows hold none to write (padding,
		 * rows past the group) only waits for and releases each stage,
		 * leaving the tensor cores to the other (the host's
		 * CG_GMM_ARG_SKIP_HALF, where this tile's lead over the m-tiles
		 * sharing its B cannot cost them B's reads; kernels/NOTES.md v35) */
		if (FP8 && C::ROW_SPLIT && (a.flags & CG_GMM_ARG_SKIP_HALF) && wg_all(1 + cw, rg[0] != tl.g && rg[1] != tl.g)) {
			consume<STAGES, RELAY>(k_iters, full, parity, cw, C::NC, [&](int, int stage) {
				if (epi_tma && leader)
					pend.issue_one(tmd, dbuf);
				release(empty, stage, lane);
			});
			continue;
		}
		/* Otherwise every warpgroup computes every tile, also rows past the
		 * group's end (never stored; their A may be stale, see the
		 * producer): tiles of equal length keep the m-tiles that share a B
		 * slab in step, so that B streams from DRAM once (measured: idling
		 * on short tiles made DSV3 gate_up 16% slower). */
		if (FP8) {
#pragma unroll
			for (int i = 0; i < C::ACC; ++i)
				acc[i] = 0.f;
		}
		consume<STAGES, RELAY>(k_iters, full, parity, cw, C::NC, [&](int kb, int stage) {
			const uint32_t ad = stage * C::A_BYTES, bd = stage * C::B_BYTES;
			if constexpr (FP8) {
				const float *slot = scales + stage * C::SLOT;
				const int q = (kb0 + kb) & (sfa_w - 1);
				const float sa_0 = slot[sa_at + q], sa_1 = slot[sa_at + 8 * sfa_w + q];
				float sb_h[C::NH];
#pragma unroll
				for (int h = 0; h < C::NH; ++h)
					sb_h[h] = slot[c0 / 128 + h];
				/* per 128-channel block: fresh fp32 partial sums, then
				 * acc += partial * sfa[row] * sfb[block] (DeepGEMM's
				 * promotion).  Passes alternate between two sets of partial
				 * sums, each promoted while the next pass computes (measured,
				 * 256 columns as four passes of 64 against two of 128 each
				 * waited for: level to 2.6% faster; kernels/NOTES.md v20). */
				constexpr int NP = C::WN / C::PW;
				auto promote = [&](int p) {
					float(&t)[C::PW / 2] = part[p & 1];
					fence_regs(t);
					const float sb = sb_h[p * C::PW / 128];
					const float s0 = sa_0 * sb, s1 = sa_1 * sb;
#pragma unroll
					for (int i = 0; i < C::PW / 2; ++i)
						acc[p * C::PW / 2 + i] = fmaf(t[i], (i & 2) ? s1 : s0, acc[p * C::PW / 2 + i]);
				};
#pragma unroll
				for (int p = 0; p < NP; ++p) {
					wgmma_fence();
#pragma unroll
					for (int k = 0; k < BK / 32; ++k)
						wgmma_fp8(part[p & 1], a_desc.at(ad + k * 32),
							  b_desc.at(bd + p * C::PW * 128 + k * 32), k != 0);
					wgmma_commit();
					if (p == 0 && epi_tma && leader)
						pend.issue_one(tmd, dbuf);
					if (p > 0) {
						wgmma_wait<1>();
						promote(p - 1);
					}
				}
				wgmma_wait<0>();
				/* stage read: release it before the last promotion */
				release(empty, stage, lane);
				promote(NP - 1);
			} else {
				wgmma_fence();
#pragma unroll
				for (int k = 0; k < BK / 16; ++k)
					wgmma_bf16<NK ? 0 : 1>(acc, a_desc.at(ad + k * 32), b_desc.at(bd + k * (NK ? 32 : 2048)),
							       (kb | k) != 0);
				wgmma_commit();
				if (epi_tma && leader)
					pend.issue_one(tmd, dbuf);
				wgmma_wait<0>();
				fence_regs(acc);
				release(empty, stage, lane);
			}
		});
		if constexpr (KSPLIT) {
			if (ranks > 1) {
				if (rank != 0) {
					ksplit_send<C::ACC, 128>(acc, reinterpret_cast<float *>(sd), recv, rank);
					continue;
				}
				ksplit_gather<C::ACC, 128>(acc, reinterpret_cast<const float *>(sd), recv, ranks);
			}
		}
		const bool ok[2] = {rg[0] == tl.g, rg[1] == tl.g};
		Tile mine = tl;
		mine.n0 += c0;
		if (epi_tma)
			sm90_store_smem(acc, tmd, a, mine, row, ok, lane, cw, dbuf, pend);
		else
			sm90_store(acc, a, mine, row, ok, lane);
	}
	if (epi_tma && leader) {
		pend.issue_all(tmd, dbuf);
		bulk_wait(); /* the stores read shared memory until they complete */
	}
	/* A tail reads only what was ready before the kernel ahead of it began
	 * and writes other tiles of D, so it waits only here, at its end, for
	 * that kernel to finish: whatever the stream runs next then sees all of
	 * D.  (Without an overlapped launch the wait returns at once.) */
	if constexpr (BM < CG_GMM_TAIL_BM)
		if (a.tail_split)
			asm volatile("griddepcontrol.wait;" ::: "memory");
#else
	(void)tma;
	(void)tmr;
	(void)tmb;
	(void)tmd;
	(void)tms;
	(void)a;
	__trap(); /* the host launches these only on sm_90 */
#endif
}

} // namespace cg
