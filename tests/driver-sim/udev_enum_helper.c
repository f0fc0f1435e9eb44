/* Lists what libudev sees of one subsystem, for sim_tree_test's umockdev check: the test runs it
 * with LD_PRELOAD=libumockdev-preload.so.0 and UMOCKDEV_DIR=<sim root>. Plain C and not
 * sanitized, so the preload order of an ASan build does not matter.
 *
 * Usage: udev_enum_helper SUBSYSTEM [ATTR...]
 * Prints one line per device, sorted by libudev's enumeration order:
 *   <sysname> subsystem=<s> devnode=<node|-> driver=<d|-> pci_parent=<sysname|->
 * <ATTR>=<value|->...
 */
#include <libudev.h>
#include <stdio.h>

static const char* Or(const char* s) { return s ? s : "-"; }

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s SUBSYSTEM [ATTR...]\n", argv[0]);
    return 2;
  }
  struct udev* udev = udev_new();
  if (!udev) return 1;
  struct udev_enumerate* en = udev_enumerate_new(udev);
  if (!en || udev_enumerate_add_match_subsystem(en, argv[1]) < 0 ||
      udev_enumerate_scan_devices(en) < 0) {
    fprintf(stderr, "enumeration of %s failed\n", argv[1]);
    return 1;
  }
  struct udev_list_entry* entry;
  udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(en)) {
    struct udev_device* dev = udev_device_new_from_syspath(udev, udev_list_entry_get_name(entry));
    if (!dev) continue;
    struct udev_device* pci = udev_device_get_parent_with_subsystem_devtype(dev, "pci", NULL);
    printf("%s subsystem=%s devnode=%s driver=%s pci_parent=%s", udev_device_get_sysname(dev),
           Or(udev_device_get_subsystem(dev)), Or(udev_device_get_devnode(dev)),
           Or(udev_device_get_driver(dev)), pci ? udev_device_get_sysname(pci) : "-");
    for (int i = 2; i < argc; ++i) {
      printf(" %s=%s", argv[i], Or(udev_device_get_sysattr_value(dev, argv[i])));
    }
    printf("\n");
    udev_device_unref(dev);
  }
  udev_enumerate_unref(en);
  udev_unref(udev);
  return 0;
}
