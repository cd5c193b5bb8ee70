try:  # an interrupt before the entry point has taken the signal ends as quietly as one later
    from gpudiag.entry import main

    main()
except KeyboardInterrupt:
    raise SystemExit(130) from None
