#include "runtime.hpp"

#include <algorithm>

namespace gnnsparse::sycl_rt {
namespace syclex = sycl::ext::oneapi::experimental;

namespace {
// Kernels follow IEEE semantics: NaN tests in max/min and softmax must not be folded away, and
// results must not depend on the compiler's reassociation (the SYCL default is fast math).
const std::vector<std::string> kBuildOptions = {"-fno-fast-math", "-ffp-contract=on"};

std::string entry_source(const std::string &entry) {
  return "#include \"" + entry + "\"\n";
}

syclex::include_files all_includes() {
  syclex::include_files inc;
  for (const auto &[path, text] : kernel_sources()) inc.add(path, text);
  return inc;
}

void check_entry(const std::string &entry) {
  const auto &src = kernel_sources();
  if (std::none_of(src.begin(), src.end(), [&](const auto &p) { return p.first == entry; }))
    throw std::invalid_argument("no embedded kernel source named '" + entry + "'");
}
}  // namespace

bool KernelCache::KeyLess::operator()(const Key &a, const Key &b) const {
  // sycl::context/device have no ordering: order by their hashes, then by identity.
  std::hash<sycl::context> hc;
  std::hash<sycl::device> hd;
  auto ka = std::make_tuple(hc(std::get<0>(a)), hd(std::get<1>(a)), std::get<2>(a), std::get<3>(a));
  auto kb = std::make_tuple(hc(std::get<0>(b)), hd(std::get<1>(b)), std::get<2>(b), std::get<3>(b));
  return ka < kb;
}

KernelCache &KernelCache::instance() {
  static KernelCache *cache = new KernelCache();  // never destroyed: kernels outlive static teardown order
  return *cache;
}

size_t KernelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

sycl::kernel KernelCache::get(const sycl::queue &q, const std::string &entry, const std::string &name) {
  Key key{q.get_context(), q.get_device(), entry, name};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  check_entry(entry);
  std::string log;
  try {
    auto src = syclex::create_kernel_bundle_from_source(q.get_context(), syclex::source_language::sycl,
                                                        entry_source(entry), syclex::properties{all_includes()});
    auto exe = syclex::build(src, std::vector<sycl::device>{q.get_device()},
                             syclex::properties{syclex::build_options{kBuildOptions}, syclex::save_log{&log},
                                                syclex::registered_names{std::vector<std::string>{name}}});
    sycl::kernel k = exe.ext_oneapi_get_kernel(name);
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.emplace(key, k).first->second;
  } catch (sycl::exception &e) {
    throw CompileError("building SYCL kernel " + name + " from " + entry + " failed: " + e.what() +
                       (log.empty() ? std::string() : "\ncompiler log:\n" + log));
  }
}

std::string KernelCache::compile_only(const sycl::queue &q, const std::string &entry,
                                      const std::vector<std::string> &names) {
  check_entry(entry);
  std::string log;
  try {
    auto src = syclex::create_kernel_bundle_from_source(q.get_context(), syclex::source_language::sycl,
                                                        entry_source(entry), syclex::properties{all_includes()});
    auto obj = syclex::compile(src, std::vector<sycl::device>{q.get_device()},
                               syclex::properties{syclex::build_options{kBuildOptions}, syclex::save_log{&log},
                                                  syclex::registered_names{names}});
    (void)obj;
  } catch (sycl::exception &e) {
    throw CompileError("compiling " + entry + " failed: " + e.what() +
                       (log.empty() ? std::string() : "\ncompiler log:\n" + log));
  }
  return log;
}

DeviceCaps device_caps(const sycl::device &d) {
  DeviceCaps c;
  c.esimd = d.has(sycl::aspect::ext_intel_esimd);
  c.fp64 = d.has(sycl::aspect::fp64);
  c.max_wg = d.get_info<sycl::info::device::max_work_group_size>();
  c.sg_sizes = d.get_info<sycl::info::device::sub_group_sizes>();
  c.preferred_sg = 0;
  for (size_t s : c.sg_sizes)
    if (s == 16) c.preferred_sg = 16;
  if (!c.preferred_sg)
    for (size_t s : c.sg_sizes)
      if (s <= 32) c.preferred_sg = std::max(c.preferred_sg, s);
  if (!c.preferred_sg) c.preferred_sg = 1;
  return c;
}

}  // namespace gnnsparse::sycl_rt
