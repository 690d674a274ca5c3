//! wasmop patch (see vendor/README.md, 6): artefacts and memory images mapped a
//! page at a time, without the kernel's fault-around and never a 2 MiB
//! page-cache folio whole.

use rustix::ioctl::ioctl;

/// Has the kernel map the mapping of `len` bytes at `ptr` (a slot's
/// copy-on-write image, a mapped artefact, the host's own code) a page at a
/// time: no fault-around, no 2 MiB folio mapped whole, where the kernel allows
/// each; where it does not, changes nothing.
///
/// On a read fault in a file mapping the kernel maps, besides the page asked
/// for, every page around it (up to 64 KiB) that is in the page cache. In a
/// slot's image that puts hundreds of pages the guest never reads into the
/// slot's page tables and the process's RSS, and every reset's `PAGEMAP_SCAN`
/// then looks each of them up to learn it is a clean file page: that lookup of
/// the page's `struct page` is most of the scan's cost (about 20 ns a page on
/// the machines measured, against a few for an empty entry).
///
/// The kernel does not fault around in a mapping registered with a
/// userfaultfd for write protection (`uffd_disable_fault_around`), and
/// asynchronous write protection (Linux 6.7, as `PAGEMAP_SCAN`) may be
/// registered on any mapping. Nothing is ever write-protected through this
/// registration, so no write faults for it and no fault is delivered to this
/// process: the registration only stops the fault-around. The userfaultfd is
/// opened for user-mode faults only, which unprivileged processes may do. It
/// lives as long as the process; a mapping's registration ends when the
/// mapping is replaced.
///
/// Nor is a mapping to take a whole 2 MiB page-cache folio with one page-table
/// entry. The kernel maps a large folio of a file (ext4 makes them as a file
/// is written, on the Linux 6.18 measured) with one PMD where the mapping is
/// aligned for it, as a mapped artefact is (2 MiB-aligned, from offset 0), and
/// 2 MiB are then resident for one page read. `MADV_NOHUGEPAGE` stops that
/// (`do_set_pmd` refuses a `VM_NOHUGEPAGE` mapping). It is given first,
/// whatever becomes of the registration: a seccomp profile that denies
/// `userfaultfd` still allows `madvise`.
///
/// `len` may end inside a page, as a mapped file's length does: the mapping
/// extends to the end of that page, and the registration, which takes whole
/// pages only (`EINVAL` otherwise), covers it.
///
/// # Safety
///
/// `ptr..ptr + len` must be a mapping this process owns, `ptr` page-aligned.
pub unsafe fn fault_in_pages_one_by_one(ptr: *mut u8, len: usize) {
    use rustix::fd::OwnedFd;
    use rustix::ioctl::{Updater, opcode};

    #[repr(C)]
    struct UffdioApi {
        api: u64,
        features: u64,
        ioctls: u64,
    }
    #[repr(C)]
    struct UffdioRegister {
        start: u64,
        len: u64,
        mode: u64,
        ioctls: u64,
    }
    const UFFD_API: u64 = 0xaa;
    const UFFD_USER_MODE_ONLY: u32 = 1;
    const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
    const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
    const UFFDIO_API: rustix::ioctl::Opcode = opcode::read_write::<UffdioApi>(0xaa, 0x3f);
    const UFFDIO_REGISTER: rustix::ioctl::Opcode =
        opcode::read_write::<UffdioRegister>(0xaa, 0x00);

    /// The process's userfaultfd, with the process it was opened in: after a
    /// `fork` it names the parent's address space, and the child must not
    /// register its mappings in that.
    static UFFD: std::sync::LazyLock<Option<(OwnedFd, libc::pid_t)>> =
        std::sync::LazyLock::new(|| {
            use rustix::mm::{UserfaultfdFlags, userfaultfd};
            let flags = UserfaultfdFlags::CLOEXEC
                | UserfaultfdFlags::NONBLOCK
                | UserfaultfdFlags::from_bits_retain(UFFD_USER_MODE_ONLY);
            // SAFETY: the descriptor is only used below, to register mappings
            // for asynchronous write protection, which never write-protects
            // anything by itself.
            let fd = match unsafe { userfaultfd(flags) } {
                Ok(fd) => fd,
                Err(err) => {
                    log::debug!("no userfaultfd, the kernel faults around in images: {err}");
                    return None;
                }
            };
            let mut api = UffdioApi {
                api: UFFD_API,
                features: UFFD_FEATURE_WP_ASYNC,
                ioctls: 0,
            };
            // SAFETY: `UffdioApi` is `struct uffdio_api`.
            if let Err(err) =
                unsafe { ioctl(&fd, Updater::<{ UFFDIO_API }, UffdioApi>::new(&mut api)) }
            {
                log::debug!("no asynchronous userfaultfd write protection: {err}");
                return None;
            }
            // SAFETY: `getpid` has no preconditions.
            Some((fd, unsafe { libc::getpid() }))
        });

    let len = len.next_multiple_of(crate::runtime::vm::host_page_size());
    // SAFETY: `ptr..ptr + len` is a mapping of this process (the caller's
    // contract), and the advice only changes how its pages are mapped, never
    // their contents.
    if let Err(err) =
        unsafe { rustix::mm::madvise(ptr.cast(), len, rustix::mm::Advice::LinuxNoHugepage) }
    {
        log::debug!("the kernel may map a mapping's large folios whole: {err}");
    }
    let Some((fd, pid)) = UFFD.as_ref() else {
        return;
    };
    // SAFETY: `getpid` has no preconditions.
    if *pid != unsafe { libc::getpid() } {
        return;
    }
    let mut register = UffdioRegister {
        start: ptr.addr() as u64,
        len: len as u64,
        mode: UFFDIO_REGISTER_MODE_WP,
        ioctls: 0,
    };
    // SAFETY: `UffdioRegister` is `struct uffdio_register`, and the range is a
    // mapping of this process (the caller's contract).
    if let Err(err) = unsafe {
        ioctl(
            fd,
            Updater::<{ UFFDIO_REGISTER }, UffdioRegister>::new(&mut register),
        )
    } {
        log::debug!("the kernel keeps faulting around in a mapping: {err}");
    }
}
