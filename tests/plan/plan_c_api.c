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
  puts("plan_c_api: ok");
  return 0;
}
