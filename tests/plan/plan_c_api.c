/* ckpt/plan.h from C: the header compiles as C11 and a launcher-style caller
 * gets the reference period and a refusal. Exit 0 on success. */
#include <ckpt/plan.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  struct ckpt_plan_interval_opts o;
  struct ckpt_plan_interval_result r;
  char msg[160];
  memset(&o, 0, sizeof o);
  memset(&r, 0, sizeof r);
  o.size = sizeof o;
  r.size = sizeof r;
  o.checkpoint_s = 23;
  o.mtbf_s = 4500;
  o.predicted = 0.7;
  if (ckpt_plan_interval(&o, &r, msg, sizeof msg) != 0) {
    fprintf(stderr, "plan_c_api: %s\n", msg);
    return 1;
  }
  if (lround(r.young_daly_period_s) != 831 || !(r.exact_period_s > 0)) {
    fprintf(stderr, "plan_c_api: T* = %f, exact %f\n", r.young_daly_period_s, r.exact_period_s);
    return 1;
  }
  o.mtbf_s = 10; /* shorter than C */
  if (ckpt_plan_interval(&o, &r, msg, sizeof msg) != -EINVAL || !strstr(msg, "MTBF")) {
    fprintf(stderr, "plan_c_api: MTBF shorter than C was not refused\n");
    return 1;
  }
  uint64_t n = 0;
  double f = 0;
  if (ckpt_plan_spares(13824, 3, 2, 1, &n, &f, msg, sizeof msg) != 0 || n != 1128) {
    fprintf(stderr, "plan_c_api: spares %llu\n", (unsigned long long)n);
    return 1;
  }
  /* 6x6 mesh, both dimensions keep one spare plane: 25 ranks. Node 2,3
   * fails; 1D slides its line along y: ranks 13 and 14 move up by one. */
  struct ckpt_plan_mesh mesh;
  memset(&mesh, 0, sizeof mesh);
  mesh.size = sizeof mesh;
  mesh.q = 2;
  mesh.dims[0] = mesh.dims[1] = 6;
  mesh.spare_dims = 2;
  mesh.thickness = 1;
  int failed[2] = {2, 3}, nodes[2 * 25];
  size_t nranks = 25;
  if (ckpt_plan_substitute(&mesh, failed, 1, CKPT_PLAN_SLIDE_1D, nodes, &nranks, msg, sizeof msg) !=
          0 ||
      nranks != 25) {
    fprintf(stderr, "plan_c_api: substitute: %s\n", msg);
    return 1;
  }
  if (nodes[2 * 13] != 2 || nodes[2 * 13 + 1] != 4 || nodes[2 * 14] != 2 ||
      nodes[2 * 14 + 1] != 5 || nodes[2 * 12] != 2 || nodes[2 * 12 + 1] != 2) {
    fprintf(stderr, "plan_c_api: substitute: unexpected map\n");
    return 1;
  }
  nranks = 10;
  if (ckpt_plan_substitute(&mesh, failed, 1, CKPT_PLAN_SLIDE_1D, nodes, &nranks, msg, sizeof msg) !=
          -ERANGE ||
      nranks != 25) {
    fprintf(stderr, "plan_c_api: a small rank_nodes was not refused\n");
    return 1;
  }
  puts("plan_c_api: ok");
  return 0;
}
