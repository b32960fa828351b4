cr_full: PID 16311: fd 251: pipe:[2455160]: also open in PID 10171 (bash), which is not in the job: checkpoint the whole job (--tree of a common ancestor)
