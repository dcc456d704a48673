// Notes of the SYCL kernel loader (sycl/kernel_store.hpp) in the _sycl module: queued while an op
// runs with the GIL released, handed to Python after the call -- warnings as RuntimeWarning, debug
// lines to logging.getLogger("gnnsparse.sycl"). sycl_module.cpp installs queue_note as the sink;
// every op binding (float and quantized) calls flush_notes after its submission.
#pragma once
#include <pybind11/pybind11.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernel_store.hpp"

namespace gnnsparse::bindings {

namespace notes_detail {
inline std::mutex mu;
inline std::vector<std::pair<sycl_rt::NoteLevel, std::string>> queued;
}  // namespace notes_detail

inline void queue_note(sycl_rt::NoteLevel level, const std::string &text) {
  std::lock_guard<std::mutex> lock(notes_detail::mu);
  notes_detail::queued.emplace_back(level, text);
}

inline void flush_notes() {
  std::vector<std::pair<sycl_rt::NoteLevel, std::string>> notes;
  {
    std::lock_guard<std::mutex> lock(notes_detail::mu);
    if (notes_detail::queued.empty()) return;
    notes.swap(notes_detail::queued);
  }
  for (const auto &[level, text] : notes) {
    if (level == sycl_rt::NoteLevel::warning) {
      if (PyErr_WarnEx(PyExc_RuntimeWarning, ("gnnsparse: " + text).c_str(), 1) != 0)
        throw pybind11::error_already_set();
    } else {
      pybind11::module_::import("logging").attr("getLogger")("gnnsparse.sycl").attr("debug")(text);
    }
  }
}

}  // namespace gnnsparse::bindings
