// Spare nodes on a Cartesian mesh and the substitution of a failed node by
// 0D, 1D or qD sliding (docs/policy.md).
#include <algorithm>
#include <ckpt/plan.hpp>
#include <cmath>
#include <cstdlib>

#include "policy/validate.hpp"

namespace ckpt::plan {

Result<double> spare_fraction(double nodes, int q, int r, int s) {
  CKPT_TRY(need_positive("the node count", nodes));
  if (q < 1) return make_error(EINVAL, "the mesh needs at least 1 dimension");
  if (r < 0 || r > q)
    return make_error(EINVAL, "the spare dimensions must be between 0 and " + std::to_string(q));
  double n = std::round(std::pow(nodes, 1.0 / q));
  if (std::pow(n, q) != nodes)
    return make_error(EINVAL, figure(nodes) + " nodes are not a " + std::to_string(q) +
                                  "-D cube (give the mesh's sides instead)");
  if (s < 0 || (r > 0 && s >= n))
    return make_error(EINVAL, "the spare thickness must be between 0 and " + figure(n - 1));
  return 1 - std::pow(n - s, r) * std::pow(n, q - r) / nodes;
}

Status check_mesh(const Mesh& m) {
  if (m.dims.empty()) return make_error(EINVAL, "the mesh needs at least 1 dimension");
  double total = 1;
  for (int d : m.dims) {
    if (d < 1) return make_error(EINVAL, "every side of the mesh needs at least 1 node");
    total *= d;
  }
  if (total > 1e8) return make_error(EINVAL, "the mesh is too large to map (over 1e8 nodes)");
  if (m.spare_dims < 0 || m.spare_dims > int(m.dims.size()))
    return make_error(
        EINVAL, "the spare dimensions must be between 0 and " + std::to_string(m.dims.size()));
  if (m.spare_dims > 0 && m.thickness < 1)
    return make_error(EINVAL, "the spare thickness must be at least 1");
  for (int i = 0; i < m.spare_dims; ++i)
    if (m.thickness >= m.dims[i])
      return make_error(EINVAL, "a spare slab of thickness " + std::to_string(m.thickness) +
                                    " leaves no compute node along dimension " + std::to_string(i));
  return {};
}

uint64_t mesh_nodes(const Mesh& m) {
  uint64_t n = 1;
  for (int d : m.dims) n *= uint64_t(d);
  return n;
}

uint64_t mesh_spares(const Mesh& m) {
  // Node by node, independently of the closed formula the tests compare it with.
  uint64_t spares = 0, total = mesh_nodes(m);
  for (uint64_t id = 0; id < total; ++id) {
    uint64_t rest = id;
    bool spare = false;
    for (int i = int(m.dims.size()) - 1; i >= 0; --i) {
      int c = int(rest % uint64_t(m.dims[i]));
      rest /= uint64_t(m.dims[i]);
      if (i < m.spare_dims && c >= m.dims[i] - m.thickness) spare = true;
    }
    spares += spare;
  }
  return spares;
}

const char* slide_name(Slide s) {
  switch (s) {
    case Slide::Zero:
      return "0D";
    case Slide::One:
      return "1D";
    case Slide::Q:
      return "qD";
    case Slide::Hybrid:
      return "hybrid";
  }
  return "?";
}

int64_t worst_collisions(Slide s, int64_t failures, bool torus) {
  if (failures < 0) return -1;
  switch (s) {
    case Slide::Zero:
      return (torus || failures <= 6) ? 2 * failures + 1 : 4 * (failures - 3);
    case Slide::One:
      return 2 + failures;
    default:
      return -1;
  }
}

Coords RankMap::coords(uint64_t node) const {
  Coords c(mesh_.dims.size());
  for (int i = int(c.size()) - 1; i >= 0; --i) {
    c[i] = int(node % uint64_t(mesh_.dims[i]));
    node /= uint64_t(mesh_.dims[i]);
  }
  return c;
}

int64_t RankMap::node_id(const Coords& c) const {
  int64_t id = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i] < 0 || c[i] >= mesh_.dims[i]) return -1;
    id = id * mesh_.dims[i] + c[i];
  }
  return id;
}

Result<RankMap> RankMap::create(const Mesh& m) {
  CKPT_TRY(check_mesh(m));
  // A map keeps three words per node: ten million nodes is ~240 MB.
  if (mesh_nodes(m) > 10'000'000)
    return make_error(EINVAL, "the mesh is too large for a rank map (over 1e7 nodes)");
  RankMap map;
  map.mesh_ = m;
  map.compute_dims_ = m.dims;
  for (int i = 0; i < m.spare_dims; ++i) map.compute_dims_[i] -= m.thickness;
  uint64_t total = mesh_nodes(m), ranks = 1;
  for (int d : map.compute_dims_) ranks *= uint64_t(d);
  map.rank_at_node_.assign(total, -1);
  map.failed_.assign(total, false);
  map.node_of_rank_.resize(ranks);
  // Rank r sits at the same coordinates in the compute region as in the mesh.
  for (uint64_t r = 0; r < ranks; ++r) {
    uint64_t rest = r;
    Coords c(m.dims.size());
    for (int i = int(c.size()) - 1; i >= 0; --i) {
      c[i] = int(rest % uint64_t(map.compute_dims_[i]));
      rest /= uint64_t(map.compute_dims_[i]);
    }
    int64_t id = map.node_id(c);
    map.node_of_rank_[r] = id;
    map.rank_at_node_[id] = int64_t(r);
  }
  return map;
}

// Slides ranks one step along +d, towards the spare slab: the failed node's
// line (1D) or the whole planes (qD) from the failed coordinate up to the
// first line position or plane that holds no rank. Every node a rank lands
// on must be alive. Nothing changes unless the whole slide works.
bool RankMap::try_slide(const Coords& f, int d, bool whole_planes, Substitution& out) {
  // Which positions along d hold a rank: on the failed node's line, or anywhere in the plane.
  std::vector<bool> occupied(size_t(mesh_.dims[d]), false);
  if (whole_planes) {
    for (int64_t node : node_of_rank_) occupied[size_t(coords(uint64_t(node))[d])] = true;
  } else {
    Coords c = f;
    for (c[d] = 0; c[d] < mesh_.dims[d]; ++c[d])
      occupied[size_t(c[d])] = rank_at_node_[uint64_t(node_id(c))] >= 0;
  }
  int end = -1;  // first position along d, beyond f[d], that holds no rank
  for (int x = f[d] + 1; x < mesh_.dims[d] && end < 0; ++x)
    if (!occupied[size_t(x)]) end = x;
  if (end < 0) return false;
  std::vector<int64_t> moving;
  for (uint64_t r = 0; r < node_of_rank_.size(); ++r) {
    Coords c = coords(node_of_rank_[r]);
    if (c[d] < f[d] || c[d] >= end) continue;
    if (!whole_planes) {
      bool same_line = true;
      for (size_t i = 0; i < c.size(); ++i)
        if (int(i) != d && c[i] != f[i]) same_line = false;
      if (!same_line) continue;
    }
    Coords to = c;
    ++to[d];
    if (failed_[node_id(to)]) return false;
    moving.push_back(int64_t(r));
  }
  // Move from the far end first so no rank lands on one not yet moved.
  std::sort(moving.begin(), moving.end(), [&](int64_t a, int64_t b) {
    return coords(node_of_rank_[a])[d] > coords(node_of_rank_[b])[d];
  });
  for (int64_t r : moving) {
    int64_t from = node_of_rank_[r];
    Coords to = coords(from);
    ++to[d];
    int64_t to_id = node_id(to);
    rank_at_node_[from] = -1;
    rank_at_node_[to_id] = r;
    node_of_rank_[r] = to_id;
    out.moves.push_back({r, coords(from), to});
  }
  out.method = whole_planes ? "qD" : "1D";
  out.dimension = d;
  return true;
}

// 0D: the failed node's rank goes to the nearest live, empty node
// (Manhattan distance; ties: the lowest node number).
bool RankMap::try_nearest(const Coords& f, Substitution& out) {
  int64_t from = node_id(f), best = -1;
  int best_dist = 0;
  for (uint64_t id = 0; id < rank_at_node_.size(); ++id) {
    if (failed_[id] || rank_at_node_[id] >= 0) continue;
    Coords c = coords(id);
    int dist = 0;
    for (size_t i = 0; i < c.size(); ++i) dist += std::abs(c[i] - f[i]);
    if (best < 0 || dist < best_dist) best = int64_t(id), best_dist = dist;
  }
  if (best < 0) return false;
  int64_t r = rank_at_node_[from];
  rank_at_node_[from] = -1;
  rank_at_node_[best] = r;
  node_of_rank_[r] = best;
  out.moves.push_back({r, f, coords(best)});
  out.method = "0D";
  return true;
}

Result<Substitution> RankMap::fail(const Coords& failed, Slide how) {
  if (failed.size() != mesh_.dims.size())
    return make_error(
        EINVAL, "the failed node needs " + std::to_string(mesh_.dims.size()) + " coordinates");
  int64_t id = node_id(failed);
  if (id < 0) return make_error(EINVAL, "the failed node is outside the mesh");
  if (failed_[id]) return make_error(EINVAL, "that node has failed already");
  Substitution s;
  s.failed = failed;
  failed_[id] = true;
  if (rank_at_node_[id] < 0) {
    s.method = "none";
    return s;
  }
  // Sliding goes towards the spares: only along the dimensions that keep a
  // slab. Among those, the slide that moves the fewest ranks.
  auto slide = [&](bool planes) {
    Substitution best;
    bool found = false;
    for (int d = 0; d < mesh_.spare_dims; ++d) {
      RankMap trial = *this;
      Substitution t = s;
      if (!trial.try_slide(failed, d, planes, t)) continue;
      if (!found || t.moves.size() < best.moves.size()) best = t, found = true;
    }
    if (found) {
      try_slide(failed, best.dimension, planes, s);
      return true;
    }
    return false;
  };
  bool ok = false;
  if (how == Slide::Q || how == Slide::Hybrid) ok = slide(true);
  if (!ok && (how == Slide::One || how == Slide::Hybrid)) ok = slide(false);
  if (!ok && (how == Slide::Zero || how == Slide::Hybrid)) ok = try_nearest(failed, s);
  if (!ok) {
    failed_[id] = false;
    return make_error(ENOSPC, std::string("no ") + slide_name(how) +
                                  " substitute left for the failed node (spares used up)");
  }
  return s;
}

int RankMap::max_neighbour_hops() const {
  int worst = 0;
  std::vector<uint64_t> stride(compute_dims_.size(), 1);
  for (int i = int(stride.size()) - 2; i >= 0; --i)
    stride[i] = stride[i + 1] * uint64_t(compute_dims_[i + 1]);
  for (uint64_t r = 0; r < node_of_rank_.size(); ++r) {
    Coords a = coords(node_of_rank_[r]);
    for (size_t i = 0; i < compute_dims_.size(); ++i) {
      if ((r / stride[i]) % uint64_t(compute_dims_[i]) + 1 >= uint64_t(compute_dims_[i])) continue;
      Coords b = coords(node_of_rank_[r + stride[i]]);
      int dist = 0;
      for (size_t k = 0; k < a.size(); ++k) dist += std::abs(a[k] - b[k]);
      worst = std::max(worst, dist);
    }
  }
  return worst;
}

}  // namespace ckpt::plan
