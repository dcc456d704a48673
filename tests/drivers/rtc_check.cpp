// Stand-alone ESIMD compile check through the SYCL kernel_compiler (front end + ESIMD lowering and
// checks to SPIR-V; no link, no run): the same path as KernelCache::compile_only in sycl/runtime.cpp.
// Used by tests/test_esimd.py when gnnsparse._sycl.compile_only is not available, and by
// tests/drivers/esimd_aot.sh (with SYCL_DUMP_IMAGES=1 the runtime writes the ESIMD SPIR-V to the cwd).
//
//   rtc_check <kernels_dir> <include_dir> <entry> [--source-is-entry] <name> [<name> ...]
// Every file under <kernels_dir> and under <include_dir> (the repository's include/, which holds
// gnnsparse/ops.hpp) is passed as an include file keyed by its path relative to that folder.
// Prints the compiler log; exit 0 on success, 1 on a compile error, 2 on bad usage.
#include <sycl/sycl.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace syclex = sycl::ext::oneapi::experimental;
namespace fs = std::filesystem;

static std::string slurp(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int main(int argc, char **argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s <kernels_dir> <include_dir> <entry> [--source-is-entry] <name>...\n", argv[0]);
    return 2;
  }
  const fs::path root = argv[1], include = argv[2];
  const std::string entry = argv[3];
  int a = 4;
  bool source_is_entry = false;
  if (std::string(argv[a]) == "--source-is-entry") { source_is_entry = true; ++a; }
  std::vector<std::string> names(argv + a, argv + argc);

  syclex::include_files inc;
  for (const fs::path &dir : {root, include})
    for (const auto &de : fs::recursive_directory_iterator(dir)) {
      if (!de.is_regular_file()) continue;
      inc.add(fs::relative(de.path(), dir).generic_string(), slurp(de.path()));
    }
  const std::string src = source_is_entry ? slurp(root / entry) : "#include \"" + entry + "\"\n";
  sycl::queue q{sycl::cpu_selector_v};
  std::string log;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    auto kb = syclex::create_kernel_bundle_from_source(q.get_context(), syclex::source_language::sycl, src,
                                                       syclex::properties{inc});
    auto obj = syclex::compile(kb, syclex::properties{syclex::save_log{&log}, syclex::registered_names{names}});
    (void)obj;
  } catch (sycl::exception &e) {
    std::printf("%s\n%s\n", e.what(), log.c_str());
    return 1;
  }
  std::printf("OK %zu instances of %s in %.2f s\n%s", names.size(), entry.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), log.c_str());
  return 0;
}
