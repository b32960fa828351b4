! fortran_jacobi READY: a Fortran program (libgfortran, allocatable arrays,
! its runtime's signal handlers). It runs a Jacobi relaxation once before ready
! as the reference, then the same relaxation again across the checkpoint, and
! checks the two results are bit-for-bit equal. The e2e protocol (ready file,
! final checks) comes from the C shim fortran_shim.c.
program fortran_jacobi
  use iso_c_binding
  implicit none
  interface
    subroutine e2e_f_init() bind(c)
    end subroutine
    subroutine e2e_f_ready() bind(c)
    end subroutine
    subroutine e2e_f_sleep_ms(ms) bind(c)
      import :: c_long
      integer(c_long), value :: ms
    end subroutine
    subroutine e2e_f_fail(step) bind(c)
      import :: c_int
      integer(c_int), value :: step
    end subroutine
    subroutine e2e_f_done() bind(c)
    end subroutine
    function e2e_f_sabotage() bind(c) result(s)
      import :: c_int
      integer(c_int) :: s
    end function
  end interface
  integer, parameter :: n = 300, iters = 150
  real(8), allocatable :: ref(:,:), a(:,:), b(:,:)
  integer :: it, i, j

  call e2e_f_init()
  allocate(ref(n,n), a(n,n), b(n,n))
  call relax(ref, b, 0)
  a = 0d0
  a(:,1) = 1d0
  if (e2e_f_sabotage() /= 0) a(1,1) = 2d0
  call e2e_f_ready()
  call relax(a, b, 10)
  do j = 1, n
    do i = 1, n
      if (a(i,j) /= ref(i,j)) call e2e_f_fail(j)
    end do
  end do
  call e2e_f_done()

contains

  ! Runs the relaxation on x (reset first unless pause_every > 0, when it is
  ! already set up), sleeping 10 ms every pause_every iterations.
  subroutine relax(x, tmp, pause_every)
    real(8), intent(inout) :: x(:,:), tmp(:,:)
    integer, intent(in) :: pause_every
    integer :: k, p, q
    if (pause_every == 0) then
      x = 0d0
      x(:,1) = 1d0
    end if
    do k = 1, iters
      do q = 2, n-1
        do p = 2, n-1
          tmp(p,q) = 0.25d0*(x(p-1,q) + x(p+1,q) + x(p,q-1) + x(p,q+1))
        end do
      end do
      x(2:n-1,2:n-1) = tmp(2:n-1,2:n-1)
      if (pause_every > 0) then
        if (mod(k, pause_every) == 0) call e2e_f_sleep_ms(100_c_long)
      end if
    end do
  end subroutine
end program
