/* Tensor maps by the bytes of their descriptor.
 *
 * A CUtensorMap is opaque: the only way to know which memory a TMA
 * descriptor passed to a kernel points at is to have seen it encoded.  JIT
 * libraries encode new descriptors on every call (DeepGEMM does), so the
 * registry is a fixed-size cache: SETS sets of WAYS entries, replaced
 * round-robin within a set.  Writers (the encode hooks) serialise per set;
 * readers (every checked launch) take no lock: each entry is a seqlock
 * whose words are all atomics. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "track.h"
#include "../report/report.h"

enum { SETS = 512, WAYS = 8, DESC = 128, DWORDS = DESC / 8,
       IWORDS = (sizeof(struct cg_tmap) + 7) / 8 };

struct entry {
	_Atomic uint32_t seq;      /* odd while being written */
	_Atomic uint64_t hash;     /* 0: empty; identifies the descriptor */
	_Atomic uint64_t info[IWORDS];
};

static struct set {
	pthread_mutex_t lock;      /* writers only */
	unsigned next;
	struct entry e[WAYS];
} sets[SETS];

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_locks(void)
{
	for (int i = 0; i < SETS; i++)
		pthread_mutex_init(&sets[i].lock, NULL);
}

static uint64_t word(const void *p, int i)
{
	uint64_t w;
	memcpy(&w, (const unsigned char *)p + 8 * i, 8);
	return w;
}

/* Every encode hashes its descriptor, and so does a launch whenever the
 * address cannot be read in place (below), so it is a multiply-add per word
 * and one final mix.  The 64-bit hash is also what identifies a descriptor
 * on lookup: two different descriptors of one process sharing it is a
 * 2^-64 event, cheaper to accept than a 128-byte compare. */
static uint64_t hash_desc(const void *desc)
{
	/* Four independent lanes: the multiplies overlap instead of chaining. */
	uint64_t a = 1, b = 2, c = 3, d = 4;
	for (int i = 0; i < DWORDS; i += 4) {
		a = (a + word(desc, i)) * 0xff51afd7ed558ccdULL;
		b = (b + word(desc, i + 1)) * 0xc4ceb9fe1a85ec53ULL;
		c = (c + word(desc, i + 2)) * 0x9e3779b97f4a7c15ULL;
		d = (d + word(desc, i + 3)) * 0xd6e8feb86659fd93ULL;
	}
	uint64_t h = a ^ (b >> 17 | b << 47) ^ (c >> 31 | c << 33) ^ (d >> 43 | d << 21);
	h ^= h >> 32;
	return h | 1;
}

/* Where a descriptor keeps its global address, learned from the encodes:
 * bit i stays set while word i has equalled globalAddress in every
 * descriptor encoded so far.  The format is undocumented, so it is trusted
 * only as far as it was seen: one encode that disagrees clears the mask for
 * good and the launch path goes back to the hash lookup.  An address read
 * this way that points at another device is confirmed by cg_tmap_find
 * before it is reported (operands.c), so 128 bytes that were never encoded
 * (a struct taken for a tensor map) never stand for an address.  Before the
 * first encode every bit is set: word 0 is read, and nothing confirms it. */
enum { NONE_YET = 1u << DWORDS };  /* no encode seen: the mask means nothing */
_Static_assert(CG_TMAP_WORDS == NONE_YET - 1, "one bit per descriptor word");
_Atomic uint32_t cg_tmap_addr_words = NONE_YET | CG_TMAP_WORDS;

static void learn(const void *desc, uintptr_t addr)
{
	uint32_t seen = 0;
	for (int i = 0; i < DWORDS; i++)
		if (word(desc, i) == addr)
			seen |= 1u << i;
	if (~seen & atomic_load_explicit(&cg_tmap_addr_words, memory_order_relaxed))
		atomic_fetch_and_explicit(&cg_tmap_addr_words, seen, memory_order_relaxed);
}

int cg_tmap_address_word(void)
{
	uint32_t m = atomic_load_explicit(&cg_tmap_addr_words, memory_order_relaxed);
	return m & NONE_YET ? -2 : m ? __builtin_ctz(m) : -1;
}

static void put(const void *desc, const struct cg_tmap *info)
{
	uint64_t iw[IWORDS] = {0};
	memcpy(iw, info, sizeof *info);
	uint64_t h = hash_desc(desc);
	struct set *s = &sets[h % SETS];
	learn(desc, info->addr);
	pthread_once(&once, init_locks);
	pthread_mutex_lock(&s->lock);
	struct entry *e = NULL;
	for (int i = 0; i < WAYS && !e; i++)
		if (atomic_load_explicit(&s->e[i].hash, memory_order_relaxed) == h)
			e = &s->e[i];
	if (!e)
		e = &s->e[s->next++ % WAYS];
	/* Release stores (plain moves on x86): a reader that sees any new
	 * word also sees the odd sequence number stored before it. */
	uint32_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
	atomic_store_explicit(&e->seq, seq + 1, memory_order_relaxed);
	atomic_store_explicit(&e->hash, h, memory_order_release);
	for (int i = 0; i < IWORDS; i++)
		atomic_store_explicit(&e->info[i], iw[i], memory_order_release);
	atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
	pthread_mutex_unlock(&s->lock);
}

/* One consistent read of the first n info words of entry e: 1 found,
 * 0 not this one, -1 torn. */
static int read_entry(const struct entry *e, uint64_t h, uint64_t *iw, int n)
{
	uint32_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
	if (seq & 1)
		return -1;
	/* Acquire loads: the sequence number is read again after them. */
	if (atomic_load_explicit(&e->hash, memory_order_acquire) != h)
		return 0;
	for (int i = 0; i < n; i++)
		iw[i] = atomic_load_explicit(&e->info[i], memory_order_acquire);
	return atomic_load_explicit(&e->seq, memory_order_relaxed) == seq ? 1 : -1;
}

static int lookup(const void *desc, uint64_t *iw, int n)
{
	uint64_t h = hash_desc(desc);
	const struct set *s = &sets[h % SETS];
	for (int i = 0; i < WAYS; i++) {
		/* Most ways hold other descriptors: one relaxed load rules them out. */
		if (atomic_load_explicit(&s->e[i].hash, memory_order_relaxed) != h)
			continue;
		int r;
		/* A torn read means a writer is replacing the entry right now. */
		for (int tries = 0; (r = read_entry(&s->e[i], h, iw, n)) < 0 && tries < 64; tries++)
			;
		if (r > 0)
			return 1;
	}
	return 0;
}

/* In a forked child: the parent's descriptors name memory of CUDA state
 * the child does not have, and a thread of the parent may have held a
 * set's lock at the fork. */
void cg_tmap_on_fork(void)
{
	for (int i = 0; i < SETS; i++) {
		for (int w = 0; w < WAYS; w++) {
			atomic_store_explicit(&sets[i].e[w].seq, 0, memory_order_relaxed);
			atomic_store_explicit(&sets[i].e[w].hash, 0, memory_order_relaxed);
		}
		sets[i].next = 0;
	}
	init_locks();
}

int cg_tmap_find(const void *desc, struct cg_tmap *out)
{
	uint64_t iw[IWORDS];
	if (!lookup(desc, iw, IWORDS))
		return 0;
	memcpy(out, iw, sizeof *out);
	return 1;
}

int cg_tmap_lookup_address(const void *desc, uintptr_t *addr)
{
	/* The address is the first word of struct cg_tmap. */
	uint64_t w;
	if (!lookup(desc, &w, 1))
		return 0;
	*addr = (uintptr_t)w;
	return 1;
}

void cg_tmap_describe(const struct cg_tmap *t, char *buf, size_t n)
{
	static const char *const types[] = {"u8", "u16", "u32", "i32", "u64", "i64", "f16",
					    "f32", "f64", "bf16", "f32_ftz", "tf32", "tf32_ftz"};
	const char *type = t->dtype >= 0 && t->dtype < (int)(sizeof types / sizeof types[0])
				   ? types[t->dtype] : "fp8/packed";
	size_t o = (size_t)snprintf(buf, n, "tensor map %s [", type);
	/* Outermost dimension first, as a tensor's shape reads. */
	for (int i = t->rank - 1; i >= 0 && o < n; i--)
		o += (size_t)snprintf(buf + o, n - o, "%llu%s", (unsigned long long)t->dims[i],
				      i ? ", " : "");
	if (o < n)
		o += (size_t)snprintf(buf + o, n - o, "] box [");
	for (int i = t->rank - 1; i >= 0 && o < n; i--)
		o += (size_t)snprintf(buf + o, n - o, "%u%s", t->box[i], i ? ", " : "");
	if (o < n)
		snprintf(buf + o, n - o, "]");
}

/* Everything a redirect needs to rebuild the operand and to tell whether
 * the kernel's copies through it are the ones it reproduces (decode.c). */
struct encode {
	CUtensorMapDataType type;
	cuuint32_t rank;
	void *addr;
	const cuuint64_t *dims, *strides;
	const cuuint32_t *box, *elem; /* NULL: an im2col encode */
	int interleave, swizzle, l2promo, oobfill;
};

static void record(const CUtensorMap *map, const struct encode *e)
{
	if (!map)
		return;
	struct cg_tmap t = {.addr = (uintptr_t)e->addr, .dtype = (int)e->type, .rank = (int)e->rank,
			    .tiled = e->box != NULL, .interleave = e->interleave,
			    .swizzle = e->swizzle, .l2promo = e->l2promo, .oobfill = e->oobfill};
	for (cuuint32_t i = 0; i < e->rank && i < 5; i++) {
		t.dims[i] = e->dims ? e->dims[i] : 0;
		t.box[i] = e->box ? e->box[i] : 0;
		t.elem_strides[i] = e->elem ? e->elem[i] : 0;
		if (i)
			t.strides[i - 1] = e->strides ? e->strides[i - 1] : 0;
	}
	if (t.rank > 5)
		t.rank = 5;
	put(map, &t);
}

CG_AFTER(cuTensorMapEncodeTiled,
	 record(tensorMap, &(struct encode){tensorDataType, tensorRank, globalAddress, globalDim,
					    globalStrides, boxDim, elementStrides, interleave,
					    swizzle, l2Promotion, oobFill}))
CG_AFTER(cuTensorMapEncodeIm2col,
	 record(tensorMap, &(struct encode){tensorDataType, tensorRank, globalAddress, globalDim,
					    globalStrides, NULL, elementStrides, interleave,
					    swizzle, l2Promotion, oobFill}))
CG_AFTER(cuTensorMapEncodeIm2colWide,
	 record(tensorMap, &(struct encode){tensorDataType, tensorRank, globalAddress, globalDim,
					    globalStrides, NULL, elementStrides, interleave,
					    swizzle, l2Promotion, oobFill}))

/* Same tensor, new address: the new descriptor inherits the shape. */
CUresult cg_on_cuTensorMapReplaceAddress(const struct cg_variant *v, CUtensorMap *tensorMap,
					 void *globalAddress)
{
	struct cg_tmap t;
	int known = tensorMap && cg_tmap_find(tensorMap, &t);
	CUresult rc = CG_REAL(cuTensorMapReplaceAddress, v)(tensorMap, globalAddress);
	if (rc == CUDA_SUCCESS && known) {
		t.addr = (uintptr_t)globalAddress;
		put(tensorMap, &t);
	}
	return rc;
}
