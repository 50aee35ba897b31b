// The device noun: nominal facts per arch without a GPU, the device's own with one.
#include <catch2/catch.hpp>

#include "kaio/ir/error.h"
#include "kaio/jit/buffer.h"
#include "kaio/jit/device.h"

using namespace kaio;

TEST_CASE("device_info_for: sm_80 and sm_90 answers without a GPU", "[jit][device]") {
  const jit::DeviceInfo a = jit::device_info_for("sm_80");
  CHECK(a.sm == 80);
  CHECK(a.suffix == '\0');
  CHECK(a.arch == "sm_80");
  CHECK(a.sm_count == 108);
  CHECK(a.smem_per_block_optin == 166912);
  CHECK(a.l2_bytes == 40u << 20);
  CHECK_FALSE(a.present);
  CHECK_FALSE(a.hopper());

  const jit::DeviceInfo h = jit::device_info_for("sm_90a");
  CHECK(h.sm == 90);
  CHECK(h.suffix == 'a');
  CHECK(h.sm_count == 132);
  CHECK(h.smem_per_block_optin == 232448);
  CHECK(h.smem_per_sm >= h.smem_per_block_optin);
  CHECK(h.hopper());
  CHECK(h.name.find("sm_90a") != std::string::npos);

  // an arch between known parts answers as the newest known one below it
  CHECK(jit::device_info_for("sm_89").smem_per_block_optin == 101376);
  CHECK(jit::device_info_for("sm_86").smem_per_block_optin == 101376);
  CHECK_THROWS_AS(jit::device_info_for("gfx90a"), UsageError);
}

TEST_CASE("device_info: the device, or the backend's target arch without one", "[jit][device]") {
  const jit::DeviceInfo& d = jit::device_info();
  CHECK(d.sm >= 80);
  CHECK(d.sm_count > 0);
  CHECK(d.smem_per_block_optin >= 48 * 1024);
  CHECK(&d == &jit::device_info());  // cached for the process
  if (!d.present) {  // no GPU (or KAIO_INTERPRET): the nominal part of the target arch
    const jit::DeviceInfo n = jit::device_info_for(d.arch);
    CHECK(d.sm_count == n.sm_count);
    CHECK(d.smem_per_block_optin == n.smem_per_block_optin);
  }
}

TEST_CASE("device_info on the device reads the driver's facts", "[gpu][device]") {
  const jit::DeviceInfo& d = jit::device_info();
  if (jit::interpret_mode()) {
    CHECK_FALSE(d.present);
    return;
  }
  CHECK(d.present);
  CHECK_FALSE(d.name.empty());
  CHECK(d.sm_count >= 16);
  CHECK(d.l2_bytes > 0);
  CHECK(d.clock_khz > 0);
  WARN("device: " << d.name << " sm_" << d.sm << ", " << d.sm_count << " SMs, " << d.smem_per_block_optin
                  << " B shared per block, L2 " << (d.l2_bytes >> 20) << " MiB");
}
