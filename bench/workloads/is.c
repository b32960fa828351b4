// An NPB-IS-like workload: integer sort by bucket counting. Keys follow
// NPB's distribution (the mean of four uniform numbers, so bell-shaped);
// each iteration changes two keys, as NPB does, then ranks every key with a
// counting sort through buckets (a histogram per bucket, prefix sums, then
// the keys scattered bucket by bucket), rewriting the rank and bucket
// arrays.
//
//   is CLASS    S 2^16 keys < 2^11 x 10, W 2^20 < 2^16 x 10,
//               A 2^23 < 2^19 x 10, B 2^25 < 2^21 x 10
//
// Self-checking (NPB's partial and full verification, computed rather than
// tabulated): after each iteration the two changed keys must have the rank
// a direct count gives; at the end the keys placed by their ranks must be in
// order and be the same multiset (count, sum and a hash of the values).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npb.h"

static uint64_t seed = 314159265;
static double uniform(void) {
  seed = seed * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(seed >> 11) / 9007199254740992.0;
}

int main(int argc, char** argv) {
  int used;
  char cls = npb_class_arg(argc, argv, &used);
  static const int clog_keys[] = {16, 20, 23, 25}, clog_max[] = {11, 16, 19, 21};
  int ci = npb_class_index(cls);
  if (ci < 0 || argc != 1 + used) {
    fprintf(stderr, "usage: is [--class] S|W|A|B\n");
    return 2;
  }
  const size_t nkeys = (size_t)1 << clog_keys[ci];
  const int32_t max_key = 1 << clog_max[ci];
  const int log_buckets = 10, nbuckets = 1 << log_buckets, shift = clog_max[ci] - log_buckets;
  const int iters = 10;
  int32_t* key = malloc(nkeys * sizeof(int32_t));
  int32_t* sorted = malloc(nkeys * sizeof(int32_t));  // keys grouped by bucket
  int32_t* rank = malloc(nkeys * sizeof(int32_t));    // final position of key[i]
  size_t* bucket_ptr = calloc(nbuckets + 1, sizeof(size_t));
  size_t* count = calloc(max_key + 1, sizeof(size_t));
  if (!key || !sorted || !rank || !bucket_ptr || !count) return 2;
  printf("is: class %c, %zu keys below %d, %d iterations (%.0f MiB)\n", cls, nkeys, max_key, iters,
         (nkeys * 12.0 + max_key * 8.0) / 1048576.0);
  for (size_t i = 0; i < nkeys; i++)
    key[i] = (int32_t)(max_key * (uniform() + uniform() + uniform() + uniform()) / 4);
  printf("computing\n");
  fflush(stdout);
  int ok = 1;
  uint64_t rank_sum = 0;
  for (int it = 1; it <= iters; it++) {
    key[it] = it;  // NPB's two changed keys
    key[it + iters] = max_key - it;
    // Buckets: histogram of the high bits, prefix sums, scatter.
    memset(bucket_ptr, 0, (nbuckets + 1) * sizeof(size_t));
    for (size_t i = 0; i < nkeys; i++) bucket_ptr[(key[i] >> shift) + 1]++;
    for (int b = 0; b < nbuckets; b++) bucket_ptr[b + 1] += bucket_ptr[b];
    for (size_t i = 0; i < nkeys; i++) {
      int b = key[i] >> shift;
      sorted[bucket_ptr[b]++] = key[i];
    }
    // Within each bucket: count keys, prefix sums give each value's first rank.
    memset(count, 0, (max_key + 1) * sizeof(size_t));
    for (size_t i = 0; i < nkeys; i++) count[sorted[i] + 1]++;
    for (int32_t v = 0; v < max_key; v++) count[v + 1] += count[v];
    // count[v] = how many keys are below v: the rank of the first key v.
    for (size_t i = 0; i < nkeys; i++) rank[i] = (int32_t)count[key[i]]++;
    for (int32_t v = max_key; v > 0; v--) count[v] = count[v - 1];  // back to "below v"
    count[0] = 0;
    // Partial verification: the changed keys' ranks by a direct count.
    for (int c = 0; c < 2; c++) {
      size_t at = c ? (size_t)(it + iters) : (size_t)it;
      size_t below = 0, equal_before = 0;
      for (size_t i = 0; i < nkeys; i++) {
        below += key[i] < key[at];
        equal_before += i < at && key[i] == key[at];
      }
      if ((size_t)rank[at] != below + equal_before) {
        printf("FAIL: iteration %d: key %zu has rank %d, a direct count gives %zu\n", it, at,
               rank[at], below + equal_before);
        ok = 0;
      }
    }
    rank_sum += (uint64_t)rank[it] + (uint64_t)rank[it + iters];
    npb_progress(it, iters, "rank", (double)rank[it + iters]);
  }
  // Full verification: place each key at its rank; the result must be a
  // sorted permutation of the keys.
  uint64_t sum_in = 0, hash_in = 0, sum_out = 0, hash_out = 0;
  memset(sorted, 0xff, nkeys * sizeof(int32_t));
  for (size_t i = 0; i < nkeys; i++) {
    sum_in += (uint64_t)key[i];
    hash_in += (uint64_t)key[i] * 0x9E3779B97F4A7C15ull ^ ((uint64_t)key[i] << 17);
    if (rank[i] < 0 || (size_t)rank[i] >= nkeys) {
      ok = 0;
      continue;
    }
    sorted[rank[i]] = key[i];
  }
  size_t disorder = 0;
  for (size_t i = 0; i < nkeys; i++) {
    sum_out += (uint64_t)sorted[i];
    hash_out += (uint64_t)sorted[i] * 0x9E3779B97F4A7C15ull ^ ((uint64_t)sorted[i] << 17);
    if (sorted[i] < 0 || (i > 0 && sorted[i] < sorted[i - 1])) disorder++;
  }
  if (disorder || sum_in != sum_out || hash_in != hash_out) {
    printf("FAIL: %zu keys out of order, sums %llu/%llu\n", disorder, (unsigned long long)sum_in,
           (unsigned long long)sum_out);
    ok = 0;
  }
  int rc = npb_verified(ok);
  printf("result: rank-sum %llu  key-sum %llu  key-hash %016llx\n", (unsigned long long)rank_sum,
         (unsigned long long)sum_in, (unsigned long long)hash_in);
  return rc;
}
